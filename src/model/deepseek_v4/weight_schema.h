// The DeepSeek-V4 weight schema (spec §4): every tensor a checkpoint of a config holds — its
// official name, logical shape, kind and the release's storage class — in checkpoint order. It is
// the one list that the CPU loader (weights.cc), the CUDA loader (cuda/cuda_model_load.cc),
// init-model's writer (init_presets.cc) and the byte accounting read. Also the checkpoint readings
// both loaders share: a linear's weight with its scale (the FP8 / FP4 pairing, validated) and the
// hash layers' tid2eid table. Pure functions over immutable values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace dsinfer::model::deepseek_v4 {

enum class TensorKind {
  kLinear,   // [out, in] weight of a linear layer: `<name>.weight` (+ `.scale` when FP8 / FP4)
  kNorm,     // a plain vector (RMSNorm weights): BF16 in the release
  kFp32,     // a plain tensor the release keeps in F32 (mHC, sinks, ape, router bias)
  kTid2eid,  // [vocab, experts per token] expert ids of a hash layer (I64 or I32)
};

// How the release stores a linear (TensorKind::kLinear): what init-model writes per weight format.
enum class LinearClass {
  kNone,       // not a linear
  kQuantized,  // FP8 e4m3 with 128x128 block scales
  kPlain,      // BF16 (embedding, head, compressors, router gate, indexer weights_proj)
  kExpert,     // a routed expert: FP4 e2m1 with per-32 scales
};

struct TensorSpec {
  std::string name;  // the checkpoint key; a linear's without ".weight"
  TensorKind kind = TensorKind::kFp32;
  LinearClass linear = LinearClass::kNone;
  std::vector<int64_t> shape;  // logical shape ([out, in] for linears)
  int layer = -1;              // -1: outside the blocks; num_layers + k: MTP layer k
  float mean = 0.0f;           // init-model's random values: normal(mean, std)
  float std = 0.0f;
  bool routed_expert() const { return linear == LinearClass::kExpert; }
};

// Writes a schema tensor by tensor, with the groups every DeepSeek-V4-family block has; both
// families' WeightSchema build on it. The `Config` of the templates is either family's config
// (the same field names).
class SchemaWriter {
 public:
  // The layer of the tensors written next (-1: outside the blocks).
  void set_layer(int layer) { layer_ = layer; }
  int layer() const { return layer_; }
  // init-model's std: 1/sqrt(in) unless given.
  void Linear(const std::string& name, int64_t out, int64_t in, LinearClass cls, float std = 0.0f);
  void Norm(const std::string& name, int64_t n);
  void Fp32(const std::string& name, std::vector<int64_t> shape, float mean, float std);
  void Push(TensorSpec spec) { specs_.push_back(std::move(spec)); }

  // An mHC site: `<p>_fn`, `_base`, `_scale` (p: "layers.N.hc_attn").
  template <typename Config>
  void Hc(const std::string& p, const Config& c) {
    const int64_t mix = (2 + int64_t{c.hc_mult}) * c.hc_mult;
    Fp32(p + "_fn", {mix, c.hc_mult * c.hidden_size}, 0.0f, 0.1f);
    Fp32(p + "_base", {mix}, 0.0f, 0.5f);
    Fp32(p + "_scale", {3}, 1.0f, 0.2f);
  }
  // A block's sublayer sites under `p` ("layers.N."): attn_norm, ffn_norm, hc_attn, hc_ffn.
  template <typename Config>
  void BlockSites(const std::string& p, const Config& c) {
    Norm(p + "attn_norm.weight", c.hidden_size);
    Norm(p + "ffn_norm.weight", c.hidden_size);
    Hc(p + "hc_attn", c);
    Hc(p + "hc_ffn", c);
  }
  // The latent attention's projections under `a` ("layers.N.attn.").
  template <typename Config>
  void LatentAttention(const std::string& a, const Config& c) {
    const int64_t D = c.hidden_size, H = c.num_heads, d = c.head_dim;
    Linear(a + "wq_a", c.q_lora_rank, D, LinearClass::kQuantized);
    Norm(a + "q_norm.weight", c.q_lora_rank);
    Linear(a + "wq_b", H * d, c.q_lora_rank, LinearClass::kQuantized);
    Linear(a + "wkv", d, D, LinearClass::kQuantized);
    Norm(a + "kv_norm.weight", d);
    Linear(a + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, H * d / c.o_groups,
           LinearClass::kQuantized);
    Linear(a + "wo_b", D, int64_t{c.o_groups} * c.o_lora_rank, LinearClass::kQuantized);
    Fp32(a + "attn_sink", {H}, 0.0f, 1.0f);
  }
  // The routed experts and the shared expert under `f` ("layers.N.ffn.").
  template <typename Config>
  void Experts(const std::string& f, const Config& c, bool shared) {
    const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
    for (int e = 0; e < c.n_routed_experts; ++e) {
      const std::string ep = f + "experts." + std::to_string(e) + ".";
      Linear(ep + "w1", I, D, LinearClass::kExpert);
      Linear(ep + "w3", I, D, LinearClass::kExpert);
      Linear(ep + "w2", D, I, LinearClass::kExpert);
    }
    if (shared) {
      Linear(f + "shared_experts.w1", I, D, LinearClass::kQuantized);
      Linear(f + "shared_experts.w3", I, D, LinearClass::kQuantized);
      Linear(f + "shared_experts.w2", D, I, LinearClass::kQuantized);
    }
  }
  std::vector<TensorSpec> Take() { return std::move(specs_); }

 private:
  int layer_ = -1;
  std::vector<TensorSpec> specs_;
};

// Every tensor of `config`'s checkpoint in checkpoint order: embed, head, norm, hc_head_*, the
// blocks "layers.N.", then the MTP layers "mtp.K." (their own projections and norms first).
std::vector<TensorSpec> WeightSchema(const io::DeepseekV4Config& config);

// The schema by name.
class WeightSchemaIndex {
 public:
  explicit WeightSchemaIndex(const io::DeepseekV4Config& config);
  // Any family's schema (V4.1's: deepseek_v41/weight_schema.h).
  explicit WeightSchemaIndex(std::vector<TensorSpec> specs);
  // The spec of `name` (DSINFER_CHECKs that the schema has it: a loader asking for a tensor the
  // schema lacks is our bug).
  const TensorSpec& Get(const std::string& name) const;
  const std::vector<TensorSpec>& all() const { return specs_; }

 private:
  std::vector<TensorSpec> specs_;
  std::unordered_map<std::string, size_t> by_name_;
};

// The storage of a linear's weight in a checkpoint.
enum class LinearStorage { kF32, kBf16, kF16, kFp8, kFp4 };

// A linear's tensors as stored: the weight and, for FP8 / FP4, its scale (`.scale` or
// `.weight_scale_inv`), validated against the spec's shape — dtype, byte size, a scale of the right
// dtype and size (FP8: [ceil(out/B), ceil(in/B)] F8_E8M0 or F32; FP4: [out, in/32] F8_E8M0).
// DataLoss naming the tensor for anything else.
struct LinearTensor {
  const io::TensorView* weight = nullptr;
  const io::TensorView* scale = nullptr;  // FP8 / FP4 only
  LinearStorage storage = LinearStorage::kF32;
  bool scale_f32 = false;  // FP8 scales in F32 (else ue8m0)
  bool quantized() const {
    return storage == LinearStorage::kFp8 || storage == LinearStorage::kFp4;
  }
};
StatusOr<LinearTensor> FindLinear(const io::Checkpoint& ckpt, const TensorSpec& spec,
                                  int fp8_block);

// A hash layer's tid2eid table ([vocab, k], I64 or I32) as int32, every id inside [0, experts).
StatusOr<std::vector<int32_t>> ReadTid2eid(const io::Checkpoint& ckpt, const TensorSpec& spec,
                                           int64_t experts);

}  // namespace dsinfer::model::deepseek_v4
