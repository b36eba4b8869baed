#include "model/deepseek_v4/weights.h"

#include <cstring>

#include "io/quant.h"
#include "model/deepseek_v4/weight_schema.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

using io::Checkpoint;
using io::DeepseekV4Config;
using io::TensorView;

// The V4 blocks, MTP layers and heads over the shared TensorLoader.
class Loader : public TensorLoader {
 public:
  Loader(const Checkpoint& ckpt, const DeepseekV4Config& config)
      : TensorLoader(ckpt, WeightSchema(config), config.fp8_block_size, config.fp8_mma),
        ckpt_(ckpt),
        config_(config) {}

  Status LoadHcHead(const std::string& prefix, HyperHeadWeights* hc) const {
    DSINFER_ASSIGN_OR_RETURN(hc->fn, LoadVector(prefix + "hc_head_fn"));
    DSINFER_ASSIGN_OR_RETURN(hc->base, LoadVector(prefix + "hc_head_base"));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, LoadVector(prefix + "hc_head_scale"));
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<CompressorWeights>> LoadCompressor(const std::string& prefix, int rate,
                                                              int dim, bool overlap) const {
    auto c = std::make_unique<CompressorWeights>();
    c->rate = rate;
    c->dim = dim;
    c->overlap = overlap;
    DSINFER_ASSIGN_OR_RETURN(Matrix wkv, LoadMatrix(prefix + "wkv"));
    DSINFER_ASSIGN_OR_RETURN(Matrix wgate, LoadMatrix(prefix + "wgate"));
    c->wkv_wgate = Matrix::Stack(std::move(wkv), std::move(wgate));
    DSINFER_ASSIGN_OR_RETURN(c->ape, LoadVector(prefix + "ape"));
    DSINFER_ASSIGN_OR_RETURN(c->norm, LoadVector(prefix + "norm.weight"));
    return c;
  }

  // A decoder block under `prefix` ("layers.N." or "mtp.K."); `holds`: its routed experts to load.
  Status LoadBlock(const std::string& prefix, int compress_rate, bool hash, BlockWeights* b,
                   const std::function<bool(int)>& holds) const {
    const auto& c = config_;
    const int64_t d = c.head_dim;
    DSINFER_RETURN_IF_ERROR(LoadBlockSites(prefix, b));

    AttentionWeights& a = b->attn;
    const std::string ap = prefix + "attn.";
    DSINFER_RETURN_IF_ERROR(LoadLatentAttention(ap, &a));
    a.compress_rate = compress_rate;
    if (compress_rate != 0) {
      const bool csa = compress_rate == c.csa_rate;
      DSINFER_ASSIGN_OR_RETURN(a.compressor, LoadCompressor(ap + "compressor.", compress_rate,
                                                            static_cast<int>(d), csa));
      if (csa) {
        a.indexer = std::make_unique<IndexerWeights>();
        DSINFER_ASSIGN_OR_RETURN(a.indexer->wq_b, LoadMatrix(ap + "indexer.wq_b"));
        DSINFER_ASSIGN_OR_RETURN(a.indexer->weights_proj, LoadMatrix(ap + "indexer.weights_proj"));
        DSINFER_ASSIGN_OR_RETURN(auto ic, LoadCompressor(ap + "indexer.compressor.", compress_rate,
                                                         c.index_head_dim, true));
        a.indexer->compressor = std::move(*ic);
      }
    }

    MoeWeights& m = b->ffn;
    const std::string fp = prefix + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(m.gate, LoadMatrix(fp + "gate"));
    if (hash) {
      DSINFER_ASSIGN_OR_RETURN(
          m.tid2eid, ReadTid2eid(ckpt_, schema().Get(fp + "gate.tid2eid"), c.n_routed_experts));
    } else {
      DSINFER_ASSIGN_OR_RETURN(m.bias, LoadVector(fp + "gate.bias"));
    }
    return LoadExperts(fp, c.n_routed_experts, c.n_shared_experts > 0, &m, holds);
  }

 private:
  const Checkpoint& ckpt_;
  const DeepseekV4Config& config_;
};

}  // namespace

TensorLoader::TensorLoader(const io::Checkpoint& ckpt, std::vector<TensorSpec> schema,
                           int fp8_block_size, bool fp8_mma)
    : ckpt_(ckpt), schema_(std::move(schema)), fp8_block_size_(fp8_block_size), fp8_mma_(fp8_mma) {}

StatusOr<Matrix> TensorLoader::LoadMatrix(const std::string& name) const {
  const TensorSpec& spec = schema_.Get(name);
  DSINFER_ASSIGN_OR_RETURN(LinearTensor t, FindLinear(ckpt_, spec, fp8_block_size_));
  DSINFER_ASSIGN_OR_RETURN(auto data,
                           io::DequantizeToF32(*t.weight, t.scale, spec.shape, fp8_block_size_));
  // bf16 holds BF16 exactly, and e4m3 / e2m1 values times power-of-two (ue8m0) scales too.
  const bool bf16_exact = t.storage == LinearStorage::kBf16 || (t.quantized() && !t.scale_f32);
  Matrix m;
  m.rows = spec.shape[0];
  m.cols = spec.shape[1];
  m.act_quant = t.quantized();
  if (fp8_mma_ && t.quantized()) {
    if (fp8_block_size_ != backend::cpu::kActQuantBlock) {
      return InvalidArgument("the FP8-instruction mode needs 128 x 128 FP8 blocks, not " +
                             std::to_string(fp8_block_size_));
    }
    DSINFER_ASSIGN_OR_RETURN(io::MmaOperand mma,
                             io::QuantizedToMma(*t.weight, t.scale, spec.shape, fp8_block_size_));
    m.mma_e4m3 = std::move(mma.e4m3);
    m.mma_scale = std::move(mma.scale);
    m.mma_bc = mma.bc;
  }
  if (bf16_exact) {
    m.bf16.resize(data.size());
    for (size_t i = 0; i < data.size(); ++i) m.bf16[i] = FloatToBf16(data[i]);
  } else {
    m.data = std::move(data);
  }
  return m;
}

StatusOr<std::vector<float>> TensorLoader::LoadVector(const std::string& name) const {
  const TensorSpec& spec = schema_.Get(name);
  DSINFER_ASSIGN_OR_RETURN(const TensorView* t, ckpt_.GetChecked(name, spec.shape));
  if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
    return DataLoss("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                    ", expected F32, BF16 or F16");
  }
  return io::DequantizeToF32(*t, nullptr, spec.shape, fp8_block_size_);
}

Status TensorLoader::LoadHc(const std::string& prefix, HyperConnectionWeights* hc) const {
  DSINFER_ASSIGN_OR_RETURN(hc->fn, LoadVector(prefix + "_fn"));
  DSINFER_ASSIGN_OR_RETURN(hc->base, LoadVector(prefix + "_base"));
  DSINFER_ASSIGN_OR_RETURN(hc->scale, LoadVector(prefix + "_scale"));
  return Status::Ok();
}

Status TensorLoader::LoadExpert(const std::string& prefix, ExpertWeights* e) const {
  DSINFER_ASSIGN_OR_RETURN(e->w1, LoadMatrix(prefix + "w1"));
  DSINFER_ASSIGN_OR_RETURN(e->w3, LoadMatrix(prefix + "w3"));
  DSINFER_ASSIGN_OR_RETURN(e->w2, LoadMatrix(prefix + "w2"));
  return Status::Ok();
}

Status TensorLoader::LoadExperts(const std::string& prefix, int routed, bool shared, MoeWeights* m,
                                 const std::function<bool(int)>& holds) const {
  m->experts.resize(static_cast<size_t>(routed));
  for (int e = 0; e < routed; ++e) {
    if (holds && !holds(e)) continue;
    DSINFER_RETURN_IF_ERROR(
        LoadExpert(prefix + "experts." + std::to_string(e) + ".", &m->experts[e]));
  }
  if (shared) {
    m->shared = std::make_unique<ExpertWeights>();
    DSINFER_RETURN_IF_ERROR(LoadExpert(prefix + "shared_experts.", m->shared.get()));
  }
  return Status::Ok();
}

Status TensorLoader::LoadLatentAttention(const std::string& prefix,
                                         LatentAttentionWeights* a) const {
  DSINFER_ASSIGN_OR_RETURN(a->wq_a, LoadMatrix(prefix + "wq_a"));
  DSINFER_ASSIGN_OR_RETURN(a->q_norm, LoadVector(prefix + "q_norm.weight"));
  DSINFER_ASSIGN_OR_RETURN(a->wq_b, LoadMatrix(prefix + "wq_b"));
  DSINFER_ASSIGN_OR_RETURN(a->wkv, LoadMatrix(prefix + "wkv"));
  DSINFER_ASSIGN_OR_RETURN(a->kv_norm, LoadVector(prefix + "kv_norm.weight"));
  DSINFER_ASSIGN_OR_RETURN(a->wo_a, LoadMatrix(prefix + "wo_a"));
  DSINFER_ASSIGN_OR_RETURN(a->wo_b, LoadMatrix(prefix + "wo_b"));
  DSINFER_ASSIGN_OR_RETURN(a->attn_sink, LoadVector(prefix + "attn_sink"));
  return Status::Ok();
}

Status TensorLoader::LoadBlockSites(const std::string& prefix, BlockSites* b) const {
  DSINFER_ASSIGN_OR_RETURN(b->attn_norm, LoadVector(prefix + "attn_norm.weight"));
  DSINFER_ASSIGN_OR_RETURN(b->ffn_norm, LoadVector(prefix + "ffn_norm.weight"));
  DSINFER_RETURN_IF_ERROR(LoadHc(prefix + "hc_attn", &b->hc_attn));
  return LoadHc(prefix + "hc_ffn", &b->hc_ffn);
}

void Matrix::CopyRow(int64_t r, float* out) const {
  if (!data.empty()) {
    std::memcpy(out, data.data() + r * cols, cols * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < cols; ++i) out[i] = Bf16ToFloat(bf16[r * cols + i]);
}

Matrix Matrix::Stack(Matrix a, Matrix b) {
  a.act_quant =
      a.act_quant || b.act_quant;  // one GEMM input for both: callers stack like with like
  if (a.mma_e4m3.empty() != b.mma_e4m3.empty() || a.mma_bc != b.mma_bc) {
    // FP8 / FP4 stacked on another format: no FP8 instruction takes both, the exact products.
    for (Matrix* m : {&a, &b}) {
      m->mma_e4m3.clear();
      m->mma_scale.clear();
      m->mma_bc = 0;
    }
  }
  a.mma_e4m3.insert(a.mma_e4m3.end(), b.mma_e4m3.begin(), b.mma_e4m3.end());
  a.mma_scale.insert(a.mma_scale.end(), b.mma_scale.begin(), b.mma_scale.end());
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

namespace {

// The checkpoint prefix of MoE layer `moe_layer` (ModelWeights::MoeLayer's numbering).
std::string MoePrefix(const io::DeepseekV4Config& config, int moe_layer) {
  return moe_layer < config.num_layers
             ? "layers." + std::to_string(moe_layer) + "."
             : "mtp." + std::to_string(moe_layer - config.num_layers) + ".";
}

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const io::Checkpoint& ckpt,
                                                           const io::DeepseekV4Config& config,
                                                           const ExpertFilter& holds) {
  Loader loader(ckpt, config);
  // MoE layer l's filter over its experts.
  auto layer_holds = [&](int l) -> std::function<bool(int)> {
    if (!holds) return {};
    return [&holds, l](int e) { return holds(l, e); };
  };
  auto w = std::make_unique<ModelWeights>();
  DSINFER_ASSIGN_OR_RETURN(w->embed, loader.LoadMatrix("embed"));
  // transformers names: embed_tokens / lm_head (before its conversion mapping renames them).
  if (config.tie_word_embeddings) {
    w->head = w->embed;  // tie_word_embeddings: the head reads the embedding matrix
  } else {
    DSINFER_ASSIGN_OR_RETURN(w->head, loader.LoadMatrix("head"));
  }
  DSINFER_ASSIGN_OR_RETURN(w->norm, loader.LoadVector("norm.weight"));
  DSINFER_RETURN_IF_ERROR(loader.LoadHcHead("", &w->hc_head));
  w->layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) {
    DSINFER_RETURN_IF_ERROR(loader.LoadBlock(MoePrefix(config, l), config.compress_ratios[l],
                                             config.hash_layers[l], &w->layers[l], layer_holds(l)));
  }
  for (int k = 0; k < config.num_mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    if (!ckpt.Find(p + "e_proj.weight")) break;  // transformers checkpoints drop mtp.*
    MtpWeights mtp;
    DSINFER_ASSIGN_OR_RETURN(mtp.e_proj, loader.LoadMatrix(p + "e_proj"));
    DSINFER_ASSIGN_OR_RETURN(mtp.h_proj, loader.LoadMatrix(p + "h_proj"));
    DSINFER_ASSIGN_OR_RETURN(mtp.enorm, loader.LoadVector(p + "enorm.weight"));
    DSINFER_ASSIGN_OR_RETURN(mtp.hnorm, loader.LoadVector(p + "hnorm.weight"));
    DSINFER_ASSIGN_OR_RETURN(mtp.norm, loader.LoadVector(p + "norm.weight"));
    DSINFER_RETURN_IF_ERROR(loader.LoadHcHead(p, &mtp.hc_head));
    // The MTP block routes by bias (its layer id is past the hash layers) and is window-only.
    DSINFER_RETURN_IF_ERROR(loader.LoadBlock(p, config.mtp_compress_ratio, false, &mtp.block,
                                             layer_holds(config.num_layers + k)));
    w->mtp.push_back(std::move(mtp));
  }
  return w;
}

}  // namespace dsinfer::model::deepseek_v4
