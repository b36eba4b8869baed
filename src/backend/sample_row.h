// The arithmetic of drawing one token from one row of logits, shared by the CPU sampler
// (sampler/sampler.cc, the reference) and the CUDA sampling kernel (backend/cuda/sample_sm90.cu),
// so that both pick the same token from the same logits (ARCHITECTURE.md §4). Header-only, no CUDA
// headers; every function is a pure function of its arguments, in IEEE float/double operations
// that both compilers round the same way: files that include this header compile without
// floating-point contraction (-ffp-contract=off / -fmad=false), and the fused multiply-adds that
// the math wants are written as explicit fmaf.
//
// The draw, given a row's processed logits y (SampleEdit below) and the request's parameters:
//   greedy: the argmax of y, ties to the lower id.
//   else  : x = y * inv_temperature, m = max x, w_i = SampleExp(x_i - m) (w = 1 at the max),
//           W_i = SampleFixed(w_i): integer weights, so every sum is exact and order-free;
//           candidates are ordered by SampleKey(x_i, i) (x desc, then id asc):
//           top-k keeps the k largest keys; top-p keeps the shortest key-ordered prefix of those
//           whose weight reaches max(1, SampleTopPThreshold(top_p, their total)); min-p keeps
//           w_i >= min_p; the token is the first kept id, in id order, whose running weight
//           exceeds SampleTarget(u, kept total) for the request's 53-bit uniform u.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/float_bits.h"

#if defined(__CUDACC__)
#define DSINFER_SAMPLE_FN __host__ __device__ __forceinline__
#else
#define DSINFER_SAMPLE_FN inline
#endif

namespace dsinfer::backend {

// A token whose processing differs from the plain logit: logit_bias, the min_tokens mask and the
// repetition / presence / frequency penalties, merged into one record per id (ids ascending).
struct SampleEdit {
  int32_t id = 0;
  int32_t mask = 0;         // 1: the id is not allowed (-inf)
  float bias = 0.0f;        // added first
  float repetition = 1.0f;  // then: y > 0 ? y / r : y * r (r != 1 only)
  float subtract = 0.0f;    // then subtracted: presence + frequency * count, computed once
};

DSINFER_SAMPLE_FN float ApplySampleEdit(float y, const SampleEdit& e) {
  if (e.mask) return -INFINITY;
  y = y + e.bias;
  if (e.repetition != 1.0f) y = y > 0.0f ? y / e.repetition : y * e.repetition;
  return y - e.subtract;
}

DSINFER_SAMPLE_FN float SampleFma(float a, float b, float c) { return FmaRn(a, b, c); }

// exp(x) for x <= 0, the same bits on every backend: Cody-Waite reduction by ln 2 and a degree-7
// polynomial (relative error ~1e-7). Below -64 (w < 2^-92, far under SampleFixed's resolution)
// and for NaN it returns 0.
DSINFER_SAMPLE_FN float SampleExp(float x) {
  if (!(x > -64.0f)) return 0.0f;
#if defined(__CUDA_ARCH__)
  const float n = floorf(SampleFma(x, 1.44269504f, 0.5f));
#else
  const float n = std::floor(SampleFma(x, 1.44269504f, 0.5f));
#endif
  float r = SampleFma(n, -0.693145752f, x);  // ln 2, high part (few bits: n * hi is exact)
  r = SampleFma(n, -1.42860677e-06f, r);     // ln 2, low part
  float p = 1.98412698e-4f;                  // 1/7!
  p = SampleFma(p, r, 1.38888889e-3f);
  p = SampleFma(p, r, 8.33333333e-3f);
  p = SampleFma(p, r, 4.16666667e-2f);
  p = SampleFma(p, r, 1.66666667e-1f);
  p = SampleFma(p, r, 0.5f);
  p = SampleFma(p, r, 1.0f);
  p = SampleFma(p, r, 1.0f);
  // 2^n for n in [-93, 0]: a normal float, so the product is exact up to one rounding.
  return p * Bits32ToFloat(static_cast<uint32_t>(static_cast<int>(n) + 127) << 23);
}

// The fixed-point scale of the weights for a vocabulary: 2^shift with shift = 61 - bit width of
// the vocabulary, so that the sum of every weight (each at most ~1) stays below 2^62.
DSINFER_SAMPLE_FN int SampleFixedShift(int64_t vocab) {
  int bits = 0;
  for (uint64_t v = static_cast<uint64_t>(vocab); v; v >>= 1) ++bits;
  return 61 - bits;
}

// A weight w in [0, ~1] as an integer multiple of 2^-shift (truncated).
DSINFER_SAMPLE_FN int64_t SampleFixed(float w, int shift) {
  // 2^shift as a float: exact, so the product is exact and only the conversion truncates.
  return static_cast<int64_t>(w * Bits32ToFloat(static_cast<uint32_t>(shift + 127) << 23));
}

// The order of candidates as one integer, larger = more likely: x descending, then id ascending.
// -0 counts as +0, so the order agrees with float comparison.
DSINFER_SAMPLE_FN uint64_t SampleKey(float x, int32_t id) {
  const uint32_t b = FloatToBits32(x == 0.0f ? 0.0f : x);
  const uint32_t ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

// The weight the top-p prefix must reach: top_p of `total`, at least 1.
DSINFER_SAMPLE_FN int64_t SampleTopPThreshold(float top_p, int64_t total) {
  const int64_t t = static_cast<int64_t>(static_cast<double>(top_p) * static_cast<double>(total));
  return t < 1 ? 1 : t;
}

// floor(u * total / 2^53) for a 53-bit uniform u: the running weight the draw must exceed.
DSINFER_SAMPLE_FN uint64_t SampleTarget(uint64_t u53, uint64_t total) {
#if defined(__CUDA_ARCH__)
  const uint64_t hi = __umul64hi(u53, total), lo = u53 * total;
#else
  const uint64_t a0 = u53 & 0xFFFFFFFFu, a1 = u53 >> 32, b0 = total & 0xFFFFFFFFu, b1 = total >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
  const uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
  const uint64_t hi = a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32), lo = u53 * total;
#endif
  return (hi << 11) | (lo >> 53);
}

}  // namespace dsinfer::backend
