// The QAT fake-quantizers of DeepSeek-V4.1, and of DeepSeek-V4 with the FP8 cache, on the device:
// the codecs of backend/quant_codec.h (kFp8Pow2, kFp4E4m3, kFp4Pow2: the scale and rounding
// definitions are there, shared with the CPU's model/quant_sim), plus
//   kBf16 (V4's RoPE dims with the FP8 cache): each value rounded to bf16, to nearest even
//   (base/dtype's FloatToBf16: NaN stays NaN); no scale.
//   Hadamard (V4's indexer queries / keys with the FP8 cache, before kFp4Pow2): the fast
//   transform's butterflies (stage h = 1, 2, 4, ...: (a, b) -> (a + b, a - b)), then one
//   multiply per value by the float 1 / sqrt(n).
// A row whose length is not a multiple of the block is left as is (the CPU does the same).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/quant_codec.h"

namespace dsinfer::backend::cuda {

enum class FakeQuant { kFp8Pow2, kFp4E4m3, kFp4Pow2, kBf16 };

// In place: every row's first `dim` values (rows at x + r * ld), in blocks of `block`
// (dim % block != 0 or block <= 0: rows left as is, as the CPU does). One thread per block.
void LaunchFakeQuantRows(float* x, int64_t rows, int64_t ld, int64_t dim, FakeQuant kind, int block,
                         StreamHandle stream);

#ifdef __CUDACC__

// The codec's kind of a FakeQuant kind (not kBf16; host code of .cu files too).
__host__ __device__ __forceinline__ qc::Kind FqKind(FakeQuant kind) {
  return kind == FakeQuant::kFp8Pow2   ? qc::Kind::kFp8Pow2
         : kind == FakeQuant::kFp4E4m3 ? qc::Kind::kFp4E4m3
                                       : qc::Kind::kFp4Pow2;
}

// base/dtype's RoundToBf16: to nearest even by the bits (NaN: quieted, as FloatToBf16).
__device__ __forceinline__ float FqRoundBf16(float v) {
  return qc::Bf16ToFloat(qc::FloatToBf16(v));
}

// The block scale s of a block with absolute maximum `amax` (>= 0).
__device__ __forceinline__ float FqScale(FakeQuant kind, float amax) {
  if (kind == FakeQuant::kBf16) return 1.0f;
  return qc::ScaleOfByte(FqKind(kind), qc::ScaleByte(FqKind(kind), amax));
}

// One value of a block with scale s, fake-quantized.
__device__ __forceinline__ float FqValue(FakeQuant kind, float x, float s) {
  if (kind == FakeQuant::kBf16) return FqRoundBf16(x);
  return qc::Round(FqKind(kind), x, s);
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
