// mma.sync m16n8k16 with bf16 operands and fp32 accumulators (sm_80+): d = A B + d for one warp's
// fragments (A: 4 registers of bf16 pairs, row-major m16 x k16; B: 2 registers, k16 x n8 by
// columns; the lower k in each register's low half). The products are exact; a step's sum rounds
// as the hardware's fp32 accumulation does (exactly where the exact sum fits its alignment window,
// as for FP4 values: indexer_topk_sm90.cu).
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

__device__ __forceinline__ void MmaBf16(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1, float (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void MmaBf16(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                        float (&d)[4]) {
  MmaBf16(a[0], a[1], a[2], a[3], b0, b1, d);
}

}  // namespace dsinfer::backend::cuda
