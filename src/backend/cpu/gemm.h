// Fp32 matrix product y = x · wᵀ on the CPU ("linear layer" orientation: w is [n, k] row-major,
// as checkpoints store weights).
//
// Batch invariance (docs/architecture.md §4): every output element is reduced over k in one fixed
// order (8 interleaved fp32 lanes, then a fixed pairwise lane sum, then the k % 8 tail), whatever m,
// the tile it falls in, or the thread that computes it. So a row's result does not depend on the
// other rows in the batch or on how a prompt was chunked.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace dsinfer::backend::cpu {

// x: [m, k] with row stride ldx; w: [n, k] contiguous; y: [m, n] with row stride ldy.
// pool may be null (runs on the calling thread).
void Gemm(const float* x, int64_t m, int64_t k, int64_t ldx, const float* w, int64_t n, float* y,
          int64_t ldy, ThreadPool* pool);

// Convenience: contiguous x [m, k] and y [m, n].
inline void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, float* y,
                   ThreadPool* pool) {
  Gemm(x, m, k, k, w, n, y, n, pool);
}

// Dot product with the same reduction order as Gemm.
float Dot(const float* a, const float* b, int64_t k);

}  // namespace dsinfer::backend::cpu
