// Bit casts between float and its 32-bit pattern, and products / fused multiply-adds that round
// once (the device's __fmul_rn / __fmaf_rn, which no contraction can change), for code compiled
// for the host and the device alike (backend/sample_row.h, backend/quant_codec.h,
// backend/softmax_fold.h). Header-only, no CUDA headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSINFER_BITS_FN __host__ __device__ __forceinline__
#else
#define DSINFER_BITS_FN inline
#endif

namespace dsinfer::backend {

DSINFER_BITS_FN uint32_t FloatToBits32(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}

DSINFER_BITS_FN float Bits32ToFloat(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

DSINFER_BITS_FN float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

DSINFER_BITS_FN float FmaRn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

}  // namespace dsinfer::backend
