// Manifold-constrained hyper-connections (spec §2.3) on the GPU, fp32 throughout:
//   HC_pre  = RMS-normalize the flat streams (LaunchRmsNorm) -> mix = fn · x (LaunchLinear, fp32
//             weight) -> LaunchHcPreFinish (sigmoid gates, Sinkhorn-Knopp, weighted collapse);
//   HC_post = LaunchHcPost; HC_head = the same mix, then LaunchHcHeadFinish.
// Plus the embedding lookup (broadcast to the streams) and a row gather.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

struct HcPreFinishParams {
  const float* mix = nullptr;    // [n, (2 + hc) * hc] = fn · rmsnorm(x)
  const float* base = nullptr;   // [(2 + hc) * hc]
  const float* scale = nullptr;  // [3]
  const float* X = nullptr;      // [n, hc, D] residual streams
  float* u = nullptr;            // [n, D] out: collapsed input of the sublayer
  float* post = nullptr;         // [n, hc] out
  float* comb = nullptr;         // [n, hc, hc] out: C[j][k] row-major
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
  int sinkhorn_iters = 0;
  float hc_eps = 1e-6f;
};
void LaunchHcPreFinish(const HcPreFinishParams& p, StreamHandle stream);

struct HcPostParams {
  const float* y = nullptr;     // [n, D] sublayer output
  const float* post = nullptr;  // [n, hc]
  const float* comb = nullptr;  // [n, hc, hc]
  float* X = nullptr;           // [n, hc, D] in/out: X[k] = post[k] y + sum_j C[j][k] X[j]
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
};
void LaunchHcPost(const HcPostParams& p, StreamHandle stream);

struct HcHeadFinishParams {
  const float* mix = nullptr;    // [n, hc]
  const float* base = nullptr;   // [hc]
  const float* scale = nullptr;  // [1]
  const float* X = nullptr;      // [n, hc, D]
  float* out = nullptr;          // [n, D]
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
  float hc_eps = 1e-6f;
};
void LaunchHcHeadFinish(const HcHeadFinishParams& p, StreamHandle stream);

struct EmbedParams {
  const void* table = nullptr;  // [V, D] bf16 (table_bf16) or fp32
  bool table_bf16 = true;
  const int32_t* ids = nullptr;  // [n]
  float* X = nullptr;            // [n, hc, D] out: every stream = table[id]
  int64_t n = 0;
  int hc = 1;
  int64_t D = 0;
};
void LaunchEmbed(const EmbedParams& p, StreamHandle stream);

// dst[i, :] = src[rows[i], :] for i < n; width floats per row.
void LaunchGatherRows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst,
                      StreamHandle stream);

}  // namespace dsinfer::backend::cuda
