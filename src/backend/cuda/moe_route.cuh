// MoE routing and the glue around the grouped expert GEMMs (spec §2.10), all on the device so a
// decode step needs no host synchronization:
//   LaunchMoeRoute:   scores from fp32 router logits, expert choice (hash table or biased top-k,
//                     ties to the lower expert id), normalized and scaled weights.
//   LaunchMoeGroup:   groups the (token, k) pairs by expert: active experts ascending, each with
//   its
//                     pair ids ascending (deterministic; feeds LaunchExpertLinear). Up to 2,048
//                     pairs in one block (or inside the route kernel), more by per-expert blocks.
//   LaunchSwiglu:     h = silu(min(g, L)) * clamp(u, -L, L)   (L <= 0: no clamp)
//   LaunchMoeCombine: out[t] = sum over the token's experts in ascending id of w * y, + shared[t].
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

constexpr int kMoeMaxK = 16;  // experts per token, at most

enum class ScoringFunc : int32_t { kSqrtSoftplus = 0, kSigmoid = 1, kSoftmax = 2 };

struct MoeRouteParams {
  const float* logits = nullptr;   // [n, E] fp32 router logits
  const float* bias = nullptr;     // [E] selection-only bias, or null
  const int32_t* tid2eid = nullptr;  // [V, K] hash table (hash layers), or null
  const int32_t* ids = nullptr;    // [n] token ids (hash layers)
  int64_t n = 0;
  int E = 0;
  int K = 0;
  ScoringFunc scoring = ScoringFunc::kSqrtSoftplus;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  int32_t* sel = nullptr;          // [n, K] out: expert ids in selection order
  float* weight = nullptr;         // [n, K] out
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
struct MoeGroupParams;
// group (optional): the grouping of the routed pairs as LaunchMoeGroup, done by the route kernel's
// last block when the pairs are few (group->done: a device int, zero, reset by the kernel).
void LaunchMoeRoute(const MoeRouteParams& p, const MoeGroupParams* group, StreamHandle stream);

struct MoeGroupParams {
  const int32_t* sel = nullptr;  // [pairs] expert of each pair (pair = t * K + k)
  int64_t pairs = 0;
  int E = 0;
  int32_t* counts = nullptr;     // [E] scratch
  int32_t* active = nullptr;     // [min(E, pairs)] out
  int32_t* num_active = nullptr; // [1] out
  int32_t* offsets = nullptr;    // [min(E, pairs) + 1] out
  int32_t* pair_list = nullptr;  // [pairs] out
  int32_t* done = nullptr;       // [1] zero; for the fused route + grouping only
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchMoeGroup(const MoeGroupParams& p, StreamHandle stream);

// g [rows, ld] (gate, overwritten with h) and u [rows, ld] (up); `cols` columns used.
void LaunchSwiglu(float* g, const float* u, int64_t rows, int64_t cols, int64_t ld, float limit,
                  StreamHandle stream);

struct MoeCombineParams {
  const float* y = nullptr;       // [n * K, D] expert outputs per pair
  const int32_t* sel = nullptr;   // [n, K]
  const float* weight = nullptr;  // [n, K]
  const float* shared = nullptr;  // [n, D] or null
  float* out = nullptr;           // [n, D]
  int64_t n = 0;
  int K = 0;
  int64_t D = 0;
};
void LaunchMoeCombine(const MoeCombineParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
