// Weight-format decoding shared by the linear kernels (CUDA-only, internal to backend/cuda).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/linear.cuh"

namespace dsinfer::backend::cuda {

__device__ __forceinline__ float ScaleAt(const void* scale, ScaleFormat sf, int64_t idx) {
  if (sf == ScaleFormat::kF32) return static_cast<const float*>(scale)[idx];
  const uint32_t b = static_cast<const uint8_t*>(scale)[idx];
  return __uint_as_float(b == 0 ? 0x00400000u : (b << 23));  // 2^(b-127); b=0 -> 2^-127
}

__device__ __forceinline__ float2 E4m3x2(uint16_t v) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return __half22float2(*reinterpret_cast<__half2*>(&h));
}

// Eight e2m1 codes of one 32-bit word (nibble b = element b) -> values / 2^14 as four float2:
// f[b] = (element b, element b + 4). Code bits [s e1 e0 m] placed as fp16 [s | exponent e |
// mantissa m<<9] give 2^(e-15)(1+m/2), or the subnormal m·2^-15 for e = 0: exactly the e2m1 value
// times 2^-14 (the caller folds 2^14 into the scale); two shifts and one lop3 per pair.
__device__ __forceinline__ void E2m1x8(uint32_t u, float2* f) {
  constexpr uint32_t kMag = 0x0E000E00u, kSign = 0x80008000u;
  const uint32_t h0 = ((u << 9) & kMag) | ((u << 12) & kSign);  // nibbles 0, 4
  const uint32_t h1 = ((u << 5) & kMag) | ((u << 8) & kSign);   // nibbles 1, 5
  const uint32_t h2 = ((u << 1) & kMag) | ((u << 4) & kSign);   // nibbles 2, 6
  const uint32_t h3 = ((u >> 3) & kMag) | (u & kSign);          // nibbles 3, 7
  f[0] = __half22float2(*reinterpret_cast<const __half2*>(&h0));
  f[1] = __half22float2(*reinterpret_cast<const __half2*>(&h1));
  f[2] = __half22float2(*reinterpret_cast<const __half2*>(&h2));
  f[3] = __half22float2(*reinterpret_cast<const __half2*>(&h3));
}

// The unscaled dot products of one 16-byte weight chunk with kM x chunks: part[j] is summed from 0
// over the chunk's values in a fixed order (FP8: element order; FP4: per 32-bit word, elements b
// and b + 4 for b = 0..3, values / 2^14). LinearBody and the decode GEMV both call these, so their
// results are bit-identical by construction; the caller then adds part[j] x scale with one fmaf.
template <int kM>
__device__ __forceinline__ void Fp8ChunkParts(const uint4& q, const float (*x)[16], float* part) {
#pragma unroll
  for (int j = 0; j < kM; ++j) part[j] = 0.0f;
  const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = E4m3x2(static_cast<uint16_t>(u[i] & 0xFFFF));
    const float2 b = E4m3x2(static_cast<uint16_t>(u[i] >> 16));
#pragma unroll
    for (int j = 0; j < kM; ++j) {
      part[j] = fmaf(a.x, x[j][4 * i], part[j]);
      part[j] = fmaf(a.y, x[j][4 * i + 1], part[j]);
      part[j] = fmaf(b.x, x[j][4 * i + 2], part[j]);
      part[j] = fmaf(b.y, x[j][4 * i + 3], part[j]);
    }
  }
}

template <int kM>
__device__ __forceinline__ void Fp4ChunkParts(const uint4& q, const float (*x)[32], float* part) {
#pragma unroll
  for (int j = 0; j < kM; ++j) part[j] = 0.0f;
  const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f[4];
    E2m1x8(u[i], f);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
#pragma unroll
      for (int j = 0; j < kM; ++j) {
        part[j] = fmaf(f[b].x, x[j][8 * i + b], part[j]);
        part[j] = fmaf(f[b].y, x[j][8 * i + b + 4], part[j]);
      }
    }
  }
}

}  // namespace dsinfer::backend::cuda
