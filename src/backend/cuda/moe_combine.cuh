// The MoE combine of one token (spec §2.10), device side: shared by the combine kernel and the
// mHC post kernel that folds it in (one operation order, so both give the same bits).
#pragma once

#include <cstdint>

#include "backend/cuda/moe_route.cuh"

namespace dsinfer::backend::cuda {

// The token's K pair indices (t * K + k) in ascending expert id, ties by k: the CPU reference's
// accumulation order.
__device__ __forceinline__ void MoeCombineOrder(const MoeCombineParams& p, int64_t t,
                                                int (&order)[kMoeMaxK]) {
  for (int k = 0; k < p.K; ++k) order[k] = k;
  for (int a = 1; a < p.K; ++a) {
    const int v = order[a];
    int b = a - 1;
    while (b >= 0 && p.sel[t * p.K + order[b]] > p.sel[t * p.K + v]) {
      order[b + 1] = order[b];
      --b;
    }
    order[b + 1] = v;
  }
}

// out[t, d] = sum over the token's experts (in `order`) of w * y, then + shared[t, d].
__device__ __forceinline__ float MoeCombineAt(const MoeCombineParams& p, int64_t t,
                                              const int (&order)[kMoeMaxK], int64_t d) {
  float acc = 0.0f;
  for (int k = 0; k < p.K; ++k) {
    const int64_t pr = t * p.K + order[k];
    acc += p.y[pr * p.D + d] * p.weight[pr];
  }
  if (p.shared) acc += p.shared[t * p.D + d];
  return acc;
}

}  // namespace dsinfer::backend::cuda
