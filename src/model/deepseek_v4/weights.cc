#include "model/deepseek_v4/weights.h"

#include <cstring>

#include "io/quant.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

using io::Checkpoint;
using io::DeepseekV4Config;
using io::TensorView;

class Loader {
 public:
  Loader(const Checkpoint& ckpt, const DeepseekV4Config& config) : ckpt_(ckpt), config_(config) {}

  // `<name>.weight` (+ `.scale` / `.weight_scale_inv` when quantized) as a [rows, cols] matrix.
  StatusOr<Matrix> LoadMatrix(const std::string& name, int64_t rows, int64_t cols) const {
    const std::string wname = name + ".weight";
    DSINFER_ASSIGN_OR_RETURN(const TensorView* w, ckpt_.Get(wname));
    const TensorView* scale = ckpt_.Find(name + ".scale");
    if (!scale) scale = ckpt_.Find(name + ".weight_scale_inv");
    const bool quantized = w->dtype == DType::kF8E4M3 || w->dtype == DType::kI8 || w->dtype == DType::kU8;
    if (!quantized && w->shape != std::vector<int64_t>{rows, cols}) {
      return DataLoss("tensor '" + wname + "' has shape " + w->ShapeString() + ", expected [" +
                      std::to_string(rows) + ", " + std::to_string(cols) + "]");
    }
    DSINFER_ASSIGN_OR_RETURN(
        auto data, io::DequantizeToF32(*w, quantized ? scale : nullptr, {rows, cols},
                                       config_.fp8_block_size));
    // bf16 holds BF16 exactly, and e4m3 / e2m1 values times power-of-two (ue8m0) scales too.
    const bool bf16_exact = w->dtype == DType::kBF16 ||
                            (quantized && scale && scale->dtype == DType::kF8E8M0);
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.act_quant = quantized;
    if (bf16_exact) {
      m.bf16.resize(data.size());
      for (size_t i = 0; i < data.size(); ++i) m.bf16[i] = FloatToBf16(data[i]);
    } else {
      m.data = std::move(data);
    }
    return m;
  }

  // A plain (unquantized) tensor of the given shape as fp32.
  StatusOr<std::vector<float>> LoadVector(const std::string& name,
                                          const std::vector<int64_t>& shape) const {
    DSINFER_ASSIGN_OR_RETURN(const TensorView* t, ckpt_.GetChecked(name, shape));
    if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
      return DataLoss("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                      ", expected F32, BF16 or F16");
    }
    return io::DequantizeToF32(*t, nullptr, shape, config_.fp8_block_size);
  }

  Status LoadHc(const std::string& prefix, HyperConnectionWeights* hc) const {
    const int64_t mix = (2 + config_.hc_mult) * config_.hc_mult;
    DSINFER_ASSIGN_OR_RETURN(hc->fn, LoadVector(prefix + "_fn", {mix, config_.hc_mult * config_.hidden_size}));
    DSINFER_ASSIGN_OR_RETURN(hc->base, LoadVector(prefix + "_base", {mix}));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, LoadVector(prefix + "_scale", {3}));
    return Status::Ok();
  }

  Status LoadHcHead(const std::string& prefix, HyperHeadWeights* hc) const {
    const int64_t n = config_.hc_mult;
    DSINFER_ASSIGN_OR_RETURN(hc->fn, LoadVector(prefix + "hc_head_fn", {n, n * config_.hidden_size}));
    DSINFER_ASSIGN_OR_RETURN(hc->base, LoadVector(prefix + "hc_head_base", {n}));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, LoadVector(prefix + "hc_head_scale", {1}));
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<CompressorWeights>> LoadCompressor(const std::string& prefix, int rate,
                                                              int dim, bool overlap) const {
    auto c = std::make_unique<CompressorWeights>();
    c->rate = rate;
    c->dim = dim;
    c->overlap = overlap;
    const int64_t width = c->width(), D = config_.hidden_size;
    DSINFER_ASSIGN_OR_RETURN(Matrix wkv, LoadMatrix(prefix + "wkv", width, D));
    DSINFER_ASSIGN_OR_RETURN(Matrix wgate, LoadMatrix(prefix + "wgate", width, D));
    c->wkv_wgate = Matrix::Stack(std::move(wkv), std::move(wgate));
    DSINFER_ASSIGN_OR_RETURN(c->ape, LoadVector(prefix + "ape", {rate, width}));
    DSINFER_ASSIGN_OR_RETURN(c->norm, LoadVector(prefix + "norm.weight", {dim}));
    return c;
  }

  Status LoadExpert(const std::string& prefix, ExpertWeights* e) const {
    const int64_t D = config_.hidden_size, I = config_.moe_intermediate_size;
    DSINFER_ASSIGN_OR_RETURN(e->w1, LoadMatrix(prefix + "w1", I, D));
    DSINFER_ASSIGN_OR_RETURN(e->w3, LoadMatrix(prefix + "w3", I, D));
    DSINFER_ASSIGN_OR_RETURN(e->w2, LoadMatrix(prefix + "w2", D, I));
    return Status::Ok();
  }

  // A decoder block under `prefix` ("layers.N." or "mtp.K.").
  Status LoadBlock(const std::string& prefix, int compress_rate, bool hash, BlockWeights* b) const {
    const auto& c = config_;
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
    DSINFER_ASSIGN_OR_RETURN(b->attn_norm, LoadVector(prefix + "attn_norm.weight", {D}));
    DSINFER_ASSIGN_OR_RETURN(b->ffn_norm, LoadVector(prefix + "ffn_norm.weight", {D}));
    DSINFER_RETURN_IF_ERROR(LoadHc(prefix + "hc_attn", &b->hc_attn));
    DSINFER_RETURN_IF_ERROR(LoadHc(prefix + "hc_ffn", &b->hc_ffn));

    AttentionWeights& a = b->attn;
    const std::string ap = prefix + "attn.";
    DSINFER_ASSIGN_OR_RETURN(a.wq_a, LoadMatrix(ap + "wq_a", c.q_lora_rank, D));
    DSINFER_ASSIGN_OR_RETURN(a.q_norm, LoadVector(ap + "q_norm.weight", {c.q_lora_rank}));
    DSINFER_ASSIGN_OR_RETURN(a.wq_b, LoadMatrix(ap + "wq_b", H * d, c.q_lora_rank));
    DSINFER_ASSIGN_OR_RETURN(a.wkv, LoadMatrix(ap + "wkv", d, D));
    DSINFER_ASSIGN_OR_RETURN(a.kv_norm, LoadVector(ap + "kv_norm.weight", {d}));
    DSINFER_ASSIGN_OR_RETURN(
        a.wo_a, LoadMatrix(ap + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups));
    DSINFER_ASSIGN_OR_RETURN(a.wo_b, LoadMatrix(ap + "wo_b", D, int64_t{c.o_groups} * c.o_lora_rank));
    DSINFER_ASSIGN_OR_RETURN(a.attn_sink, LoadVector(ap + "attn_sink", {H}));
    a.compress_rate = compress_rate;
    if (compress_rate != 0) {
      const bool csa = compress_rate == c.csa_rate;
      DSINFER_ASSIGN_OR_RETURN(a.compressor,
                               LoadCompressor(ap + "compressor.", compress_rate, static_cast<int>(d), csa));
      if (csa) {
        a.indexer = std::make_unique<IndexerWeights>();
        DSINFER_ASSIGN_OR_RETURN(a.indexer->wq_b, LoadMatrix(ap + "indexer.wq_b",
                                                             int64_t{c.index_n_heads} * c.index_head_dim,
                                                             c.q_lora_rank));
        DSINFER_ASSIGN_OR_RETURN(a.indexer->weights_proj,
                                 LoadMatrix(ap + "indexer.weights_proj", c.index_n_heads, D));
        DSINFER_ASSIGN_OR_RETURN(auto ic, LoadCompressor(ap + "indexer.compressor.", compress_rate,
                                                         c.index_head_dim, true));
        a.indexer->compressor = std::move(*ic);
      }
    }

    MoeWeights& m = b->ffn;
    const std::string fp = prefix + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(m.gate, LoadMatrix(fp + "gate", c.n_routed_experts, D));
    if (hash) {
      DSINFER_ASSIGN_OR_RETURN(const TensorView* t,
                               ckpt_.GetChecked(fp + "gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}));
      if (t->dtype != DType::kI64 && t->dtype != DType::kI32) {
        return DataLoss("tensor '" + fp + "gate.tid2eid' must be I64 or I32");
      }
      m.tid2eid.resize(static_cast<size_t>(t->numel()));
      for (int64_t i = 0; i < t->numel(); ++i) {
        int64_t v;
        if (t->dtype == DType::kI64) {
          std::memcpy(&v, t->data + i * 8, 8);
        } else {
          int32_t v32;
          std::memcpy(&v32, t->data + i * 4, 4);
          v = v32;
        }
        if (v < 0 || v >= c.n_routed_experts) {
          return DataLoss("tensor '" + fp + "gate.tid2eid' holds expert id " + std::to_string(v) +
                          " outside [0, " + std::to_string(c.n_routed_experts) + ")");
        }
        m.tid2eid[i] = static_cast<int32_t>(v);
      }
    } else {
      DSINFER_ASSIGN_OR_RETURN(m.bias, LoadVector(fp + "gate.bias", {c.n_routed_experts}));
    }
    m.experts.resize(c.n_routed_experts);
    for (int e = 0; e < c.n_routed_experts; ++e) {
      DSINFER_RETURN_IF_ERROR(LoadExpert(fp + "experts." + std::to_string(e) + ".", &m.experts[e]));
    }
    if (c.n_shared_experts > 0) {
      m.shared = std::make_unique<ExpertWeights>();
      DSINFER_RETURN_IF_ERROR(LoadExpert(fp + "shared_experts.", m.shared.get()));
    }
    return Status::Ok();
  }

 private:
  const Checkpoint& ckpt_;
  const DeepseekV4Config& config_;
};

}  // namespace

void Matrix::CopyRow(int64_t r, float* out) const {
  if (!data.empty()) {
    std::memcpy(out, data.data() + r * cols, cols * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < cols; ++i) out[i] = Bf16ToFloat(bf16[r * cols + i]);
}

Matrix Matrix::Stack(Matrix a, Matrix b) {
  a.act_quant = a.act_quant || b.act_quant;  // one GEMM input for both: callers stack like with like
  if (a.data.empty() != b.data.empty()) {  // mixed storage: widen both to fp32
    for (Matrix* m : {&a, &b}) {
      if (!m->data.empty()) continue;
      m->data.resize(m->bf16.size());
      for (size_t i = 0; i < m->bf16.size(); ++i) m->data[i] = Bf16ToFloat(m->bf16[i]);
      m->bf16.clear();
    }
  }
  a.data.insert(a.data.end(), b.data.begin(), b.data.end());
  a.bf16.insert(a.bf16.end(), b.bf16.begin(), b.bf16.end());
  a.rows += b.rows;
  return a;
}

StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const io::Checkpoint& ckpt,
                                                          const io::DeepseekV4Config& config) {
  Loader loader(ckpt, config);
  auto w = std::make_unique<ModelWeights>();
  const int64_t V = config.vocab_size, D = config.hidden_size;
  DSINFER_ASSIGN_OR_RETURN(w->embed, loader.LoadMatrix("embed", V, D));
  // transformers names: embed_tokens / lm_head (before its conversion mapping renames them).
  if (config.tie_word_embeddings) {
    w->head = w->embed;  // tie_word_embeddings: the head reads the embedding matrix
  } else {
    DSINFER_ASSIGN_OR_RETURN(w->head, loader.LoadMatrix("head", V, D));
  }
  DSINFER_ASSIGN_OR_RETURN(w->norm, loader.LoadVector("norm.weight", {D}));
  DSINFER_RETURN_IF_ERROR(loader.LoadHcHead("", &w->hc_head));
  w->layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) {
    DSINFER_RETURN_IF_ERROR(loader.LoadBlock("layers." + std::to_string(l) + ".",
                                             config.compress_ratios[l], config.hash_layers[l],
                                             &w->layers[l]));
  }
  for (int k = 0; k < config.num_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    if (!ckpt.Find(p + "e_proj.weight")) break;  // transformers checkpoints drop mtp.*
    MtpWeights mtp;
    DSINFER_ASSIGN_OR_RETURN(mtp.e_proj, loader.LoadMatrix(p + "e_proj", D, D));
    DSINFER_ASSIGN_OR_RETURN(mtp.h_proj, loader.LoadMatrix(p + "h_proj", D, D));
    DSINFER_ASSIGN_OR_RETURN(mtp.enorm, loader.LoadVector(p + "enorm.weight", {D}));
    DSINFER_ASSIGN_OR_RETURN(mtp.hnorm, loader.LoadVector(p + "hnorm.weight", {D}));
    DSINFER_ASSIGN_OR_RETURN(mtp.norm, loader.LoadVector(p + "norm.weight", {D}));
    DSINFER_RETURN_IF_ERROR(loader.LoadHcHead(p, &mtp.hc_head));
    // The MTP block routes by bias (its layer id is past the hash layers) and is window-only.
    DSINFER_RETURN_IF_ERROR(loader.LoadBlock(p, config.mtp_compress_ratio, false, &mtp.block));
    w->mtp.push_back(std::move(mtp));
  }
  return w;
}

}  // namespace dsinfer::model::deepseek_v4
