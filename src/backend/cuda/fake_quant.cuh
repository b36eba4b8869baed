// The QAT fake-quantizers of DeepSeek-V4.1, and of DeepSeek-V4 with the FP8 cache, on the device,
// bit-exact with the CPU's (model/quant_sim.{h,cc}: Fp8BlockSim / Fp4BlockSim / HadamardRotate /
// KvFormat's bf16 tail, which the layering keeps out of reach of this folder, so the formulas are
// restated here):
//   kFp8Pow2 (window KV, block 32; V4: 64): s = Pow2Ceil(max(amax, 1e-4) * (1/448)),
//                                      x = e4m3_rne(clamp(x / s, +-448)) * s
//   kFp4E4m3 (compressed KV, block 16): s = e4m3_rne(max(amax, 6*2^-9) / 6)
//   kFp4Pow2 (index keys / queries, block 32):
//                                      s = Pow2Ceil(max(amax, 6*2^-126) * (1/6))
//   then (both FP4) x = e2m1(clamp(x / s, +-6)) * s, ties to the even code (0.25, 1.25, 2.5, 5
//   round down; 0.75, 1.75, 3.5 round up).
//   kBf16 (V4's RoPE dims with the FP8 cache): each value rounded to bf16, to nearest even
//   (base/dtype's FloatToBf16: NaN stays NaN); no scale.
//   Hadamard (V4's indexer queries / keys with the FP8 cache, before kFp4Pow2): the fast
//   transform's butterflies (stage h = 1, 2, 4, ...: (a, b) -> (a + b, a - b)), then one
//   multiply per value by the float 1 / sqrt(n).
// Pow2Ceil(v) = 2^(exponent(v) - 127 + (mantissa(v) != 0)) by the bits (clamped to 2^-127 ..
// 2^128); e4m3_rne as base/dtype's FloatToE4M3 (saturating at 448, subnormals in units of 2^-9).
// x / s is a true division (__fdiv_rn) and every product rounds once (__fmul_rn), as on the CPU.
// A row whose length is not a multiple of the block is left as is (the CPU does the same).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

enum class FakeQuant { kFp8Pow2, kFp4E4m3, kFp4Pow2, kBf16 };

// In place: every row's first `dim` values (rows at x + r * ld), in blocks of `block`
// (dim % block != 0 or block <= 0: rows left as is, as the CPU does). One thread per block.
void LaunchFakeQuantRows(float* x, int64_t rows, int64_t ld, int64_t dim, FakeQuant kind, int block,
                         StreamHandle stream);

#ifdef __CUDACC__

// 2^(b - 127) for a scale byte b in [0, 255] (b = 0: the subnormal 2^-127; b = 255: +inf), exact.
__device__ __forceinline__ float FqPow2OfByte(int b) {
  if (b == 0) return __uint_as_float(0x00400000u);
  if (b == 255) return __uint_as_float(0x7f800000u);
  return __uint_as_float(static_cast<uint32_t>(b) << 23);
}

// Pow2CeilScale of the CPU: by the exponent bits of v (v > 0).
__device__ __forceinline__ float FqPow2CeilScale(float v) {
  const uint32_t bits = __float_as_uint(v);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF);
  const int k = exponent - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return FqPow2OfByte(min(max(k + 127, 0), 255));
}

// base/dtype's FloatToE4M3 (saturating round-to-nearest-even; NaN -> 0x7f).
__device__ __forceinline__ uint8_t FqFloatToE4m3(float f) {
  if (isnan(f)) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  const float a = fminf(fabsf(f), 448.0f);
  if (a < 0.015625f) return sign | static_cast<uint8_t>(rintf(__fmul_rn(a, 512.0f)));
  uint32_t bits = __float_as_uint(a);
  bits += 0x7FFFFu + ((bits >> 20) & 1u);
  const int exp8 = static_cast<int>(bits >> 23) - 127 + 7;
  return sign | static_cast<uint8_t>((exp8 << 3) | ((bits >> 20) & 7u));
}

// base/dtype's E4M3ToFloat (exp 15 mant 7: NaN), exact.
__device__ __forceinline__ float FqE4m3ToFloat(uint8_t v) {
  const uint32_t exp = (v >> 3) & 0xfu, mant = v & 7u;
  float mag;
  if (exp == 0) {
    mag = __fmul_rn(static_cast<float>(mant), 0.001953125f);  // mant * 2^-9
  } else if (exp == 15 && mant == 7) {
    mag = __uint_as_float(0x7fc00000u);
  } else {  // (8 + mant) * 2^(exp - 10)
    mag = __fmul_rn(static_cast<float>(mant | 8u), __uint_as_float((exp - 10 + 127) << 23));
  }
  return (v & 0x80) ? -mag : mag;
}

// std::clamp(v, lo, hi) (NaN stays NaN).
__device__ __forceinline__ float FqClamp(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

// The e2m1 value of a value already clamped to [-6, 6] (the CPU's E2m1Code + E2m1Value; zero has
// no sign).
__device__ __forceinline__ float FqRoundE2m1(float v) {
  const float m = fabsf(v);
  int code = 0;
  code += m > 0.25f;
  code += m >= 0.75f;
  code += m > 1.25f;
  code += m >= 1.75f;
  code += m > 2.5f;
  code += m >= 3.5f;
  code += m > 5.0f;
  const float mag = code <= 4 ? 0.5f * code : (code == 5 ? 3.0f : (code == 6 ? 4.0f : 6.0f));
  return code != 0 && signbit(v) ? -mag : mag;
}

// base/dtype's RoundToBf16: to nearest even by the bits (NaN: quieted, as FloatToBf16).
__device__ __forceinline__ float FqRoundBf16(float v) {
  const uint32_t bits = __float_as_uint(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((bits >> 16) | 0x40u) << 16);
  return __uint_as_float(((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16) << 16);
}

// The block scale s of a block with absolute maximum `amax` (>= 0).
__device__ __forceinline__ float FqScale(FakeQuant kind, float amax) {
  switch (kind) {
    case FakeQuant::kBf16:
      return 1.0f;
    case FakeQuant::kFp8Pow2:
      return FqPow2CeilScale(__fmul_rn(fmaxf(amax, 1e-4f), 1.0f / 448.0f));
    case FakeQuant::kFp4E4m3:
      return FqE4m3ToFloat(FqFloatToE4m3(__fdiv_rn(fmaxf(amax, 6.0f * 0x1p-9f), 6.0f)));
    default:
      return FqPow2CeilScale(__fmul_rn(fmaxf(amax, 6.0f * 0x1p-126f), 1.0f / 6.0f));
  }
}

// One value of a block with scale s, fake-quantized.
__device__ __forceinline__ float FqValue(FakeQuant kind, float x, float s) {
  if (kind == FakeQuant::kBf16) return FqRoundBf16(x);
  const float q = __fdiv_rn(x, s);
  if (kind == FakeQuant::kFp8Pow2) {
    return __fmul_rn(FqE4m3ToFloat(FqFloatToE4m3(FqClamp(q, -448.0f, 448.0f))), s);
  }
  return __fmul_rn(FqRoundE2m1(FqClamp(q, -6.0f, 6.0f)), s);
}

// One block of `block` values at x (stride 1), by one thread.
__device__ __forceinline__ void FqBlockSerial(float* x, int block, FakeQuant kind) {
  if (kind == FakeQuant::kBf16) {
    for (int i = 0; i < block; ++i) x[i] = FqRoundBf16(x[i]);
    return;
  }
  float amax = 0.0f;
  for (int i = 0; i < block; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float s = FqScale(kind, amax);
  for (int i = 0; i < block; ++i) x[i] = FqValue(kind, x[i], s);
}

// A row of `dim` values (shared or global memory) by the threads of a block: thread i takes
// blocks i, i + blockDim.x, ... (dim % block != 0: left as is). The caller synchronizes before
// (the row written) and after (the row read by other threads).
__device__ __forceinline__ void FqRowByBlock(float* x, int dim, int block, FakeQuant kind) {
  if (block <= 0 || dim % block != 0) return;
  for (int b = threadIdx.x; b < dim / block; b += blockDim.x)
    FqBlockSerial(x + b * block, block, kind);
}

// Warp-cooperative: each lane holds one value; lanes [g * block, g * block + block) form a block
// (block a power of two <= 32, every lane of the warp taking part). Returns the lane's value
// fake-quantized (max is order-independent, so this equals FqBlockSerial bit for bit).
__device__ __forceinline__ float FqWarpBlock(float v, int block, FakeQuant kind) {
  float amax = fabsf(v);
  for (int o = block / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  return FqValue(kind, v, FqScale(kind, amax));
}

// HadamardRotate of the CPU on `rows` rows of n values (n a power of two; else left as is) in
// shared or global memory, by the threads of a block (every thread must call it; it
// synchronizes between stages and at the end; the caller synchronizes before).
__device__ __forceinline__ void FqHadamardRows(float* x, int rows, int n) {
  if (n <= 0 || (n & (n - 1)) != 0) return;
  const int half = n / 2;
  for (int h = 1; h < n; h *= 2) {
    for (int i = threadIdx.x; i < rows * half; i += blockDim.x) {
      const int r = i / half, k = i % half;
      float* v = x + r * n + (k / h) * 2 * h + k % h;
      const float a = v[0], b = v[h];
      v[0] = __fadd_rn(a, b);
      v[h] = __fsub_rn(a, b);
    }
    __syncthreads();
  }
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(static_cast<float>(n)));
  for (int i = threadIdx.x; i < rows * n; i += blockDim.x) x[i] = __fmul_rn(x[i], scale);
  __syncthreads();
}

#endif  // __CUDACC__

}  // namespace dsinfer::backend::cuda
