// Manifold-constrained hyper-connections (spec §2.3) on the GPU, fp32 throughout:
//   HC_pre  = LaunchHcMix (split-k partial sums of fn · x and of x·x over 256-input slices, many
//             blocks) -> LaunchHcPreFinish (reduce the partials in slice order, mix = (fn · x) *
//             rms_scale(x), sigmoid gates, Sinkhorn-Knopp, weighted collapse, then the sublayer's
//             RMSNorm of the collapsed row);
//   HC_post = LaunchHcPost; HC_head = the same mix, then LaunchHcHeadFinish (+ the final norm).
// Batch invariance: a token's partials and their reduction order depend only on (hc, D).
// Plus the embedding lookup (broadcast to the streams) and a row gather.
#pragma once

#include <cstdint>

#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/runtime.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

constexpr int kMaxHc = 8;  // the largest hc_mult the mHC kernels take

// part[t, s, o] for o < nout: sum over inputs k of slice s (k in [s*256, s*256+256)) of
// fn[o, k] * X[t, k]; part[t, s, nout] = sum of X[t, k]^2 over the slice. Fixed order per token.
struct HcMixParams {
  const float* X = nullptr;   // [n, ldx] fp32; first K columns
  int64_t ldx = 0;
  int64_t K = 0;              // hc * D
  const float* fn = nullptr;  // [nout, K] fp32
  int nout = 0;               // <= 80
  int64_t n = 0;
  float* part = nullptr;      // [n, HcMixSlices(K), nout + 1]
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
int64_t HcMixSlices(int64_t K);
void LaunchHcMix(const HcMixParams& p, StreamHandle stream);

struct HcPreFinishParams {
  const float* part = nullptr;   // LaunchHcMix output (nout = (2 + hc) * hc), or LaunchHcPost's
  int64_t mix_slices = 0;        // its slices: 0 = HcMix's (HcMixSlices), else HcPostMixSlices
  float rms_eps = 1e-6f;         // eps of the flat RMSNorm and of the sublayer norm
  const float* norm_w = nullptr; // [D] sublayer RMSNorm weight
  float* xn = nullptr;           // [n, D] out: RMSNorm(u) * norm_w, u = sum_i pre_i X_i
  const float* base = nullptr;   // [(2 + hc) * hc]
  const float* scale = nullptr;  // [3]
  const float* X = nullptr;      // [n, hc, D] residual streams
  float* post = nullptr;         // [n, hc] out
  float* comb = nullptr;         // [n, hc, hc] out: C[j][k] row-major
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
  int sinkhorn_iters = 0;
  float hc_eps = 1e-6f;
  // Optional: xn act_quant'ed as well (the FP8/FP4 linears' input, the bits of LaunchActQuant),
  // xq [n, ldq] f16 and xs [n, lds] scales (QuantizedLd / QuantizedScales(D)).
  uint16_t* xq = nullptr;
  int64_t ldq = 0;
  float* xs = nullptr;
  int64_t lds = 0;
  // Optional, and the same in the FP8-instruction mode's form (QuantizedRows::c / cs, the bits of
  // LaunchMmaActQuantRows): e4m3 codes xc [n, ldc], the scales transposed xcs[(d / 128) * ldcs +
  // row] (ldc >= MmaQuantLd(D), ldcs >= n).
  uint8_t* xc = nullptr;
  int64_t ldc = 0;
  float* xcs = nullptr;
  int64_t ldcs = 0;
  // When the split finish lets the next kernels launch (PDL): 0 at its start, 1 after its wait, 2
  // after its stores (their weight preloads then do not overlap the kernels before it; from 257
  // rows block 0's Sinkhorn stores post and comb after it, which the next kernels' wait covers).
  int trigger = 0;
  // Single-pass mHC (DeepSeek-V4.1): pre_out [n, hc] receives the site's own collapse weights, and
  // the collapse uses pre_in [n, hc] (the previous site's) instead. Both optional, not aliased.
  const float* pre_in = nullptr;
  float* pre_out = nullptr;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchHcPreFinish(const HcPreFinishParams& p, StreamHandle stream);

struct HcPostParams {
  const float* y = nullptr;  // [n, D] sublayer output, or (null) the MoE combine of `moe`
  MoeCombineParams moe;      // used when y is null (moe.out unused): the combine folded in
  // Optional: the next HcPre's mix partials of the updated X (mix_fn [(2 + hc) * hc, hc * D]) into
  // mix_part [n, HcPostMixSlices(hc, D), nout + 1]; needs HcPostMixSlices(hc, D) > 0.
  const float* mix_fn = nullptr;
  float* mix_part = nullptr;
  const float* post = nullptr;  // [n, hc]
  const float* comb = nullptr;  // [n, hc, hc]
  float* X = nullptr;           // [n, hc, D] in/out: X[k] = post[k] y + sum_j C[j][k] X[j]
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
};
void LaunchHcPost(const HcPostParams& p, StreamHandle stream);
// Slices of the mix partials LaunchHcPost writes with mix_fn; 0: it cannot (hc != 4 or D not a
// multiple of 64).
int64_t HcPostMixSlices(int hc, int64_t D);
// Rows from which the post with the next mix takes several tokens per block (16, then 32 from
// kHcPostMixWideRows; launch choices that never change a bit).
constexpr int64_t kHcPostMixManyRows = 512, kHcPostMixWideRows = 4096;

struct HcHeadFinishParams {
  const float* part = nullptr;   // LaunchHcMix output (nout = hc)
  float rms_eps = 1e-6f;
  const float* norm_w = nullptr; // [D] final RMSNorm weight, applied in place to out
  const float* base = nullptr;   // [hc]
  const float* scale = nullptr;  // [1]
  const float* X = nullptr;      // [n, hc, D]
  float* out = nullptr;          // [n, D] out: RMSNorm(sum_i pre_i X_i) * norm_w
  int64_t n = 0;
  int hc = 0;
  int64_t D = 0;
  float hc_eps = 1e-6f;
  // Single-pass mHC (DeepSeek-V4.1): collapse with these weights [n, hc] (the last site's pre);
  // part, base and scale are then unused.
  const float* pre_in = nullptr;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
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
