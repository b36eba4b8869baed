#include "model/deepseek_v41/weights.h"

#include "model/deepseek_v41/weight_schema.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

using deepseek_v4::TensorLoader;

// The V4.1 blocks over the shared TensorLoader.
class Loader : public TensorLoader {
 public:
  Loader(const io::Checkpoint& ckpt, const io::DeepseekV41Config& config)
      : TensorLoader(ckpt, WeightSchema(config), config.fp8_block_size),
        ckpt_(ckpt),
        config_(config) {}

  Status LoadBlock(int l, BlockWeights* b) const {
    const auto& c = config_;
    const std::string p = "layers." + std::to_string(l) + ".";
    DSINFER_RETURN_IF_ERROR(LoadBlockSites(p, b));

    AttentionWeights& a = b->attn;
    const std::string ap = p + "attn.";
    DSINFER_RETURN_IF_ERROR(LoadLatentAttention(ap, &a));
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

    for (size_t e = 0; e < c.engram_layer_ids.size(); ++e) {
      if (c.engram_layer_ids[e] != l) continue;
      const std::string g = p + "engram.";
      b->engram = std::make_unique<EngramWeights>();
      EngramWeights& w = *b->engram;
      DSINFER_ASSIGN_OR_RETURN(
          w.embed,
          EngramTable::Open(ckpt_, g + "embed.", c.engram_num_embeddings[e], c.engram_head_dim));
      DSINFER_ASSIGN_OR_RETURN(w.wkv, LoadMatrix(g + "wkv"));
      DSINFER_ASSIGN_OR_RETURN(w.q_weight, LoadVector(g + "q_weight"));
      DSINFER_ASSIGN_OR_RETURN(w.k_weight, LoadVector(g + "k_weight"));
      w.qk_weight.resize(w.q_weight.size());
      for (size_t i = 0; i < w.qk_weight.size(); ++i)
        w.qk_weight[i] = w.q_weight[i] * w.k_weight[i];
    }
    const std::string f = p + "ffn.";
    DSINFER_ASSIGN_OR_RETURN(b->ffn.gate, LoadMatrix(f + "gate"));
    DSINFER_ASSIGN_OR_RETURN(b->ffn.bias, LoadVector(f + "gate.bias"));
    DSINFER_ASSIGN_OR_RETURN(b->gate_bias_vl, LoadVector(f + "gate.bias_vl"));
    return LoadExperts(f, c.n_routed_experts, /*shared=*/true, &b->ffn);
  }

 private:
  const io::Checkpoint& ckpt_;
  const io::DeepseekV41Config& config_;
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

StatusOr<std::unique_ptr<DSparkWeights>> DSparkWeights::Load(const io::Checkpoint& ckpt,
                                                             const io::DeepseekV41Config& config) {
  DSINFER_RETURN_IF_ERROR(config.ValidateDSpark());
  const TensorLoader loader(ckpt, DSparkWeightSchema(config), config.fp8_block_size);
  auto w = std::make_unique<DSparkWeights>();
  const int stages = config.num_nextn_predict_layers;
  DSINFER_ASSIGN_OR_RETURN(w->main_proj, loader.LoadMatrix("mtp.0.main_proj"));
  DSINFER_ASSIGN_OR_RETURN(w->main_norm, loader.LoadVector("mtp.0.main_norm.weight"));
  w->stages.resize(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    DSparkStageWeights& st = w->stages[static_cast<size_t>(s)];
    const std::string p = "mtp." + std::to_string(s) + ".";
    DSINFER_RETURN_IF_ERROR(loader.LoadBlockSites(p, &st));
    DSINFER_RETURN_IF_ERROR(loader.LoadLatentAttention(p + "attn.", &st.attn));
    DSINFER_ASSIGN_OR_RETURN(st.ffn.gate, loader.LoadMatrix(p + "ffn.gate"));
    DSINFER_ASSIGN_OR_RETURN(st.ffn.bias, loader.LoadVector(p + "ffn.gate.bias"));
    DSINFER_RETURN_IF_ERROR(
        loader.LoadExperts(p + "ffn.", config.dspark_n_routed_experts, /*shared=*/true, &st.ffn));
  }
  const std::string last = "mtp." + std::to_string(stages - 1) + ".";
  DSINFER_ASSIGN_OR_RETURN(w->norm, loader.LoadVector(last + "norm.weight"));
  if (config.dspark_markov_rank > 0) {
    DSINFER_ASSIGN_OR_RETURN(w->markov_embed, loader.LoadMatrix(last + "markov_head.embed"));
    DSINFER_ASSIGN_OR_RETURN(w->markov_head, loader.LoadMatrix(last + "markov_head.head"));
  }
  DSINFER_ASSIGN_OR_RETURN(Matrix proj, loader.LoadMatrix(last + "confidence_head.proj"));
  w->confidence.resize(static_cast<size_t>(proj.cols));
  proj.CopyRow(0, w->confidence.data());
  return w;
}

}  // namespace dsinfer::model::deepseek_v41
