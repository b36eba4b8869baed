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

// Every tensor of `config`'s checkpoint in checkpoint order: embed, head, norm, hc_head_*, the
// blocks "layers.N.", then the MTP layers "mtp.K." (their own projections and norms first).
std::vector<TensorSpec> WeightSchema(const io::DeepseekV4Config& config);

// The schema by name.
class WeightSchemaIndex {
 public:
  explicit WeightSchemaIndex(const io::DeepseekV4Config& config);
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
