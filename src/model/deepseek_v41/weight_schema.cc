#include "model/deepseek_v41/weight_schema.h"

#include <cmath>

namespace dsinfer::model::deepseek_v41 {

namespace {

class SchemaBuilder {
 public:
  explicit SchemaBuilder(const io::DeepseekV41Config& c) : c_(c) {}

  void Linear(const std::string& name, int64_t out, int64_t in, LinearClass cls, float std = 0) {
    specs_.push_back({name,
                      TensorKind::kLinear,
                      cls,
                      {out, in},
                      layer_,
                      0.0f,
                      std > 0 ? std : 1.0f / std::sqrt(static_cast<float>(in))});
  }
  void Norm(const std::string& name, int64_t n) {
    specs_.push_back({name, TensorKind::kNorm, LinearClass::kNone, {n}, layer_, 1.0f, 0.1f});
  }
  void Fp32(const std::string& name, std::vector<int64_t> shape, float mean, float std) {
    specs_.push_back(
        {name, TensorKind::kFp32, LinearClass::kNone, std::move(shape), layer_, mean, std});
  }

  void Hc(const std::string& p) {
    const int64_t mix = (2 + c_.hc_mult) * c_.hc_mult;
    Fp32(p + "_fn", {mix, c_.hc_mult * c_.hidden_size}, 0.0f, 0.1f);
    Fp32(p + "_base", {mix}, 0.0f, 0.5f);
    Fp32(p + "_scale", {3}, 1.0f, 0.2f);
  }

  void Block(int l) {
    const auto& c = c_;
    layer_ = l;
    const std::string p = "layers." + std::to_string(l) + ".";
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
    Norm(p + "attn_norm.weight", D);
    Norm(p + "ffn_norm.weight", D);
    Hc(p + "hc_attn");
    Hc(p + "hc_ffn");
    const std::string a = p + "attn.";
    Linear(a + "wq_a", c.q_lora_rank, D, LinearClass::kQuantized);
    Norm(a + "q_norm.weight", c.q_lora_rank);
    Linear(a + "wq_b", H * d, c.q_lora_rank, LinearClass::kQuantized);
    Linear(a + "wkv", d, D, LinearClass::kQuantized);
    Norm(a + "kv_norm.weight", d);
    Linear(a + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups,
           LinearClass::kQuantized);
    Linear(a + "wo_b", D, int64_t{c.o_groups} * c.o_lora_rank, LinearClass::kQuantized);
    Fp32(a + "attn_sink", {H}, 0.0f, 1.0f);
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
    const std::string f = p + "ffn.";
    Linear(f + "gate", c.n_routed_experts, D, LinearClass::kPlain);
    Fp32(f + "gate.bias", {c.n_routed_experts}, 0.0f, 0.3f);
    Fp32(f + "gate.bias_vl", {c.n_routed_experts}, 0.0f, 0.3f);
    const int64_t I = c.moe_intermediate_size;
    for (int e = 0; e < c.n_routed_experts; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      Linear(x + "w1", I, D, LinearClass::kExpert);
      Linear(x + "w2", D, I, LinearClass::kExpert);
      Linear(x + "w3", I, D, LinearClass::kExpert);
    }
    Linear(f + "shared_experts.w1", I, D, LinearClass::kQuantized);
    Linear(f + "shared_experts.w2", D, I, LinearClass::kQuantized);
    Linear(f + "shared_experts.w3", I, D, LinearClass::kQuantized);
  }

  std::vector<TensorSpec> Build() {
    const int64_t V = c_.vocab_size, D = c_.hidden_size;
    layer_ = -1;
    Linear("embed", V, D, LinearClass::kPlain, 1.0f);
    if (!c_.tie_word_embeddings) Linear("head", V, D, LinearClass::kPlain);
    Norm("norm.weight", D);
    for (int l = 0; l < c_.num_layers; ++l) Block(l);
    return std::move(specs_);
  }

 private:
  const io::DeepseekV41Config& c_;
  int layer_ = -1;
  std::vector<TensorSpec> specs_;
};

}  // namespace

std::vector<TensorSpec> WeightSchema(const io::DeepseekV41Config& config) {
  return SchemaBuilder(config).Build();
}

bool IsSkippedTensor(const std::string& name) {
  for (const char* prefix :
       {"mtp.", "vision.", "aligner.", "image_start", "image_end", "image_newline"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace dsinfer::model::deepseek_v41
