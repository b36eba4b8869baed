// Block-scale decoding shared by the linear kernels (CUDA-only, internal to backend/cuda).
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

}  // namespace dsinfer::backend::cuda
