// The bf16 linear on the tensor cores with fp32-exact operands, for the 129,280-row head:
// y[m, n] = x[m, k] · W[n, k]ᵀ, W bf16, x fp32. Each x row is split into three bf16 parts,
// x = x1 + x2 + x3 exactly (x1 = bf16(x), x2 = bf16(x - x1), x3 = x - x1 - x2: 8 + 8 + 8 bits of
// the 24-bit mantissa), so every product w · x_i is exact in fp32 and the sum is fp32-accurate;
// the accumulation is the tensor cores' (mma.sync m16n8k16 bf16, fp32 accumulate).
//
// Batch invariance: each output element is one fixed chain over k — per 16-column step, the
// three parts in the order x3, x2, x1, each an mma into the element's one accumulator from zero —
// whatever m, the token tile or the grid (small-m and many-row launches differ in warps per token
// tile only), so a row's bits do not depend on the batch: prefill = decode.
//
// Header without CUDA types; the launcher allocates nothing.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct Bf16TcLinearParams {
  const uint16_t* w = nullptr;  // [n, k] bf16, row-major, 16-byte aligned rows (k % 8 == 0)
  int64_t n = 0, k = 0;
  const float* x = nullptr;  // [m, ldx] fp32
  int64_t ldx = 0;
  int64_t m = 0;
  uint16_t* split = nullptr;  // scratch: Bf16SplitElements(m, k) bf16 (x's three parts)
  float* y = nullptr;         // [m, ldy]
  int64_t ldy = 0;
  // InvalidArgument naming what is wrong (null buffers, shapes, strides, alignment).
  Status Validate() const;
};
// Rows from which a launch takes the 64-token tile (fewer: the 8-token tile); never a result.
constexpr int64_t kBf16TcManyRows = 32;
// Scratch elements for m rows of width k.
int64_t Bf16SplitElements(int64_t m, int64_t k);
// Whether the kernel takes this shape (k a multiple of 16, n > 0).
bool Bf16TcLinearSupports(int64_t n, int64_t k);
void LaunchBf16TcLinear(const Bf16TcLinearParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
