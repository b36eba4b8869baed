#include "model/deepseek_v41/weight_schema.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

class SchemaBuilder : public deepseek_v4::SchemaWriter {
 public:
  explicit SchemaBuilder(const io::DeepseekV41Config& c) : c_(c) {}

  void Block(int l) {
    const auto& c = c_;
    set_layer(l);
    const std::string p = "layers." + std::to_string(l) + ".";
    const int64_t D = c.hidden_size, d = c.head_dim;
    BlockSites(p, c);
    const std::string a = p + "attn.";
    LatentAttention(a, c);
    if (c.IsKvSource(l)) {
      Linear(a + "compressor.wkv", d, D, LinearClass::kPlain);
      if (c.compress_ratios[l] > 1) Linear(a + "compressor.wgate", d, D, LinearClass::kPlain);
      Norm(a + "compressor.norm.weight", d);
    }
    if (c.IsIndexSource(l)) {
      Linear(a + "indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank,
             LinearClass::kQuantized);
      Linear(a + "indexer.weights_proj", c.index_n_heads, D, LinearClass::kPlain);
      if (c.IsKvSource(l)) {
        Linear(a + "indexer.wk", c.index_head_dim, d, LinearClass::kPlain);
        Norm(a + "indexer.k_norm.weight", c.index_head_dim);
      }
    }
    const int e = EngramIndex(l);
    if (e >= 0) {
      // The Engram n-gram table (F8_E4M3 rows with a scale per 32 channels in the release; the
      // scales are unused by a float table), its projection and the gate weights.
      const std::string g = p + "engram.";
      const int64_t hd = c.engram_head_dim;
      const int64_t cols = int64_t{c.engram_max_ngram_size - 1} * c.engram_n_heads;
      const int64_t rows = e < static_cast<int>(c.engram_num_embeddings.size())
                               ? c.engram_num_embeddings[static_cast<size_t>(e)]
                               : 0;
      Linear(g + "embed", rows, hd, LinearClass::kPlain, 1.0f);
      if (hd / 32 > 0) Fp32(g + "embed.scale", {rows, hd / 32}, 1.0f, 0.0f);
      Linear(g + "wkv", (int64_t{c.hc_mult} + 1) * D, cols * hd, LinearClass::kPlain);
      Fp32(g + "q_weight", {c.hc_mult, D}, 1.0f, 0.3f);
      Fp32(g + "k_weight", {c.hc_mult, D}, 1.0f, 0.3f);
    }
    const std::string f = p + "ffn.";
    Linear(f + "gate", c.n_routed_experts, D, LinearClass::kPlain);
    Fp32(f + "gate.bias", {c.n_routed_experts}, 0.0f, 0.3f);
    Fp32(f + "gate.bias_vl", {c.n_routed_experts}, 0.0f, 0.3f);
    Experts(f, c, /*shared=*/true);
  }

  // The DSpark draft stages `mtp.{s}.` (docs/architecture.md "DSpark"): window-only blocks with
  // their own MoE sizes; stage 0 also projects the taps, the last stage holds the final norm, the
  // Markov head and the confidence head. The trunk's embed and head are shared.
  std::vector<TensorSpec> BuildDSpark() {
    io::DeepseekV41Config c = c_;
    c.n_routed_experts = c_.dspark_n_routed_experts;
    const int64_t V = c.vocab_size, D = c.hidden_size, r = c.dspark_markov_rank;
    const int stages = c.num_nextn_predict_layers;
    for (int s = 0; s < stages; ++s) {
      set_layer(c.num_layers + s);
      const std::string p = "mtp." + std::to_string(s) + ".";
      if (s == 0) {
        const int64_t taps = static_cast<int64_t>(c.dspark_target_layer_ids.size());
        Linear(p + "main_proj", D, taps * D, LinearClass::kQuantized);
        Norm(p + "main_norm.weight", D);
      }
      BlockSites(p, c);
      LatentAttention(p + "attn.", c);
      Linear(p + "ffn.gate", c.n_routed_experts, D, LinearClass::kPlain);
      Fp32(p + "ffn.gate.bias", {c.n_routed_experts}, 0.0f, 0.3f);
      Experts(p + "ffn.", c, /*shared=*/true);
      if (s == stages - 1) {
        Norm(p + "norm.weight", D);
        if (r > 0) {
          Linear(p + "markov_head.embed", V, r, LinearClass::kPlain, 1.0f);
          Linear(p + "markov_head.head", V, r, LinearClass::kPlain);
        }
        Linear(p + "confidence_head.proj", 1, D + r, LinearClass::kPlain);
      }
    }
    return Take();
  }

  std::vector<TensorSpec> Build() {
    const int64_t V = c_.vocab_size, D = c_.hidden_size;
    set_layer(-1);
    Linear("embed", V, D, LinearClass::kPlain, 1.0f);
    if (!c_.tie_word_embeddings) Linear("head", V, D, LinearClass::kPlain);
    Norm("norm.weight", D);
    for (int l = 0; l < c_.num_layers; ++l) Block(l);
    return Take();
  }

 private:
  int EngramIndex(int l) const {
    for (size_t i = 0; i < c_.engram_layer_ids.size(); ++i) {
      if (c_.engram_layer_ids[i] == l) return static_cast<int>(i);
    }
    return -1;
  }

  const io::DeepseekV41Config& c_;
};

}  // namespace

std::vector<TensorSpec> WeightSchema(const io::DeepseekV41Config& config) {
  return SchemaBuilder(config).Build();
}

std::vector<TensorSpec> DSparkWeightSchema(const io::DeepseekV41Config& config) {
  return SchemaBuilder(config).BuildDSpark();
}

bool IsSkippedTensor(const std::string& name) {
  for (const char* prefix :
       {"mtp.", "vision.", "aligner.", "image_start", "image_end", "image_newline"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace dsinfer::model::deepseek_v41
