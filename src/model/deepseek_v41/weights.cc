#include "model/deepseek_v41/weights.h"

#include <unordered_map>

#include "base/dtype.h"
#include "io/quant.h"
#include "model/deepseek_v41/weight_schema.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

using deepseek_v4::FindLinear;
using deepseek_v4::LinearStorage;
using deepseek_v4::LinearTensor;

class Loader {
 public:
  Loader(const io::Checkpoint& ckpt, const io::DeepseekV41Config& config)
      : ckpt_(ckpt), config_(config), specs_(WeightSchema(config)) {
    for (size_t i = 0; i < specs_.size(); ++i) by_name_[specs_[i].name] = i;
  }

  const TensorSpec& Spec(const std::string& name) const { return specs_[by_name_.at(name)]; }

  StatusOr<Matrix> LoadMatrix(const std::string& name) const {
    const TensorSpec& spec = Spec(name);
    DSINFER_ASSIGN_OR_RETURN(LinearTensor t, FindLinear(ckpt_, spec, config_.fp8_block_size));
    DSINFER_ASSIGN_OR_RETURN(
        auto data, io::DequantizeToF32(*t.weight, t.scale, spec.shape, config_.fp8_block_size));
    const bool bf16_exact = t.storage == LinearStorage::kBf16 || (t.quantized() && !t.scale_f32);
    Matrix m;
    m.rows = spec.shape[0];
    m.cols = spec.shape[1];
    m.act_quant = t.quantized();
    if (bf16_exact) {
      m.bf16.resize(data.size());
      for (size_t i = 0; i < data.size(); ++i) m.bf16[i] = FloatToBf16(data[i]);
    } else {
      m.data = std::move(data);
    }
    return m;
  }

  StatusOr<std::vector<float>> LoadVector(const std::string& name) const {
    const TensorSpec& spec = Spec(name);
    DSINFER_ASSIGN_OR_RETURN(const io::TensorView* t, ckpt_.GetChecked(name, spec.shape));
    if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16) {
      return DataLoss("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                      ", expected F32, BF16 or F16");
    }
    return io::DequantizeToF32(*t, nullptr, spec.shape, config_.fp8_block_size);
  }

  Status LoadHc(const std::string& prefix, HyperConnectionWeights* hc) const {
    DSINFER_ASSIGN_OR_RETURN(hc->fn, LoadVector(prefix + "_fn"));
    DSINFER_ASSIGN_OR_RETURN(hc->base, LoadVector(prefix + "_base"));
    DSINFER_ASSIGN_OR_RETURN(hc->scale, LoadVector(prefix + "_scale"));
    return Status::Ok();
  }

  Status LoadExpert(const std::string& prefix, ExpertWeights* e) const {
    DSINFER_ASSIGN_OR_RETURN(e->w1, LoadMatrix(prefix + "w1"));
    DSINFER_ASSIGN_OR_RETURN(e->w3, LoadMatrix(prefix + "w3"));
    DSINFER_ASSIGN_OR_RETURN(e->w2, LoadMatrix(prefix + "w2"));
    return Status::Ok();
  }

  Status LoadBlock(int l, BlockWeights* b) const {
    const auto& c = config_;
    const std::string p = "layers." + std::to_string(l) + ".";
    DSINFER_ASSIGN_OR_RETURN(b->attn_norm, LoadVector(p + "attn_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(b->ffn_norm, LoadVector(p + "ffn_norm.weight"));
    DSINFER_RETURN_IF_ERROR(LoadHc(p + "hc_attn", &b->hc_attn));
    DSINFER_RETURN_IF_ERROR(LoadHc(p + "hc_ffn", &b->hc_ffn));

    AttentionWeights& a = b->attn;
    const std::string ap = p + "attn.";
    DSINFER_ASSIGN_OR_RETURN(a.wq_a, LoadMatrix(ap + "wq_a"));
    DSINFER_ASSIGN_OR_RETURN(a.q_norm, LoadVector(ap + "q_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(a.wq_b, LoadMatrix(ap + "wq_b"));
    DSINFER_ASSIGN_OR_RETURN(a.wkv, LoadMatrix(ap + "wkv"));
    DSINFER_ASSIGN_OR_RETURN(a.kv_norm, LoadVector(ap + "kv_norm.weight"));
    DSINFER_ASSIGN_OR_RETURN(a.wo_a, LoadMatrix(ap + "wo_a"));
    DSINFER_ASSIGN_OR_RETURN(a.wo_b, LoadMatrix(ap + "wo_b"));
    DSINFER_ASSIGN_OR_RETURN(a.attn_sink, LoadVector(ap + "attn_sink"));
    a.compress_ratio = c.compress_ratios[l];
    if (c.IsKvSource(l)) {
      a.compressor = std::make_unique<CompressorWeights>();
      a.compressor->ratio = a.compress_ratio;
      DSINFER_ASSIGN_OR_RETURN(a.compressor->wkv, LoadMatrix(ap + "compressor.wkv"));
      if (a.compress_ratio > 1) {
        DSINFER_ASSIGN_OR_RETURN(a.compressor->wgate, LoadMatrix(ap + "compressor.wgate"));
      }
      DSINFER_ASSIGN_OR_RETURN(a.compressor->norm, LoadVector(ap + "compressor.norm.weight"));
    }
    if (c.IsIndexSource(l)) {
      a.indexer = std::make_unique<IndexerWeights>();
      DSINFER_ASSIGN_OR_RETURN(a.indexer->wq_b, LoadMatrix(ap + "indexer.wq_b"));
      DSINFER_ASSIGN_OR_RETURN(a.indexer->weights_proj, LoadMatrix(ap + "indexer.weights_proj"));
      a.indexer->owns_k = c.IsKvSource(l);
      if (a.indexer->owns_k) {
        DSINFER_ASSIGN_OR_RETURN(a.indexer->wk, LoadMatrix(ap + "indexer.wk"));
        DSINFER_ASSIGN_OR_RETURN(a.indexer->k_norm, LoadVector(ap + "indexer.k_norm.weight"));
      }
    }

    const std::string f = p + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(b->ffn.gate, LoadMatrix(f + "gate"));
    DSINFER_ASSIGN_OR_RETURN(b->ffn.bias, LoadVector(f + "gate.bias"));
    DSINFER_ASSIGN_OR_RETURN(b->gate_bias_vl, LoadVector(f + "gate.bias_vl"));
    b->ffn.experts.resize(c.n_routed_experts);
    for (int e = 0; e < c.n_routed_experts; ++e) {
      DSINFER_RETURN_IF_ERROR(
          LoadExpert(f + "experts." + std::to_string(e) + ".", &b->ffn.experts[e]));
    }
    b->ffn.shared = std::make_unique<ExpertWeights>();
    return LoadExpert(f + "shared_experts.", b->ffn.shared.get());
  }

 private:
  const io::Checkpoint& ckpt_;
  const io::DeepseekV41Config& config_;
  std::vector<TensorSpec> specs_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const io::Checkpoint& ckpt,
                                                           const io::DeepseekV41Config& config) {
  Loader loader(ckpt, config);
  auto w = std::make_unique<ModelWeights>();
  DSINFER_ASSIGN_OR_RETURN(w->embed, loader.LoadMatrix("embed"));
  if (config.tie_word_embeddings) {
    w->head = w->embed;
  } else {
    DSINFER_ASSIGN_OR_RETURN(w->head, loader.LoadMatrix("head"));
  }
  DSINFER_ASSIGN_OR_RETURN(w->norm, loader.LoadVector("norm.weight"));
  w->layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) {
    DSINFER_RETURN_IF_ERROR(loader.LoadBlock(l, &w->layers[l]));
  }
  return w;
}

}  // namespace dsinfer::model::deepseek_v41
