// The MoE combine of one token (spec §2.10), device side: shared by the combine kernel and the
// mHC post kernel that folds it in (one operation order, so both give the same bits).
#pragma once

#include <climits>
#include <cstdint>

#include "backend/cuda/moe_route.cuh"

namespace dsinfer::backend::cuda {

// The token's K pairs in the CPU reference's accumulation order (ascending expert id, ties by k),
// as ranks: pair t * K + k is added rank[k]-th. Registers only (every loop unrolled, every index
// static: the previous insertion sort kept the order in local memory and reloaded the ids in its
// data-dependent loop).
__device__ __forceinline__ void MoeCombineRanks(const MoeCombineParams& p, int64_t t,
                                                int (&rank)[kMoeMaxK]) {
  int sel[kMoeMaxK];
#pragma unroll
  for (int k = 0; k < kMoeMaxK; ++k) sel[k] = k < p.K ? p.sel[t * p.K + k] : INT_MAX;
#pragma unroll
  for (int k = 0; k < kMoeMaxK; ++k) {
    int r = 0;
#pragma unroll
    for (int j = 0; j < kMoeMaxK; ++j)
      r += (sel[j] < sel[k] || (sel[j] == sel[k] && j < k)) ? 1 : 0;
    rank[k] = r;
  }
}

// out[t, d] = sum over the token's experts in rank order of w * y, one fmaf each, then
// + shared[t, d]. The K rows' values load together, independent of the ranks (so they need not
// wait for the expert ids); the sum picks them in rank order.
__device__ __forceinline__ float MoeCombineAt(const MoeCombineParams& p, int64_t t,
                                              const int (&rank)[kMoeMaxK], int64_t d) {
  float yv[kMoeMaxK], wv[kMoeMaxK];
#pragma unroll
  for (int k = 0; k < kMoeMaxK; ++k) {
    const int64_t pr = t * p.K + k;
    yv[k] = k < p.K ? p.y[pr * p.D + d] : 0.0f;
    wv[k] = k < p.K ? p.weight[pr] : 0.0f;
  }
  float acc = 0.0f;
#pragma unroll
  for (int r = 0; r < kMoeMaxK; ++r) {
    if (r >= p.K) break;
    float y = 0.0f, w = 0.0f;
#pragma unroll
    for (int k = 0; k < kMoeMaxK; ++k) {
      if (k >= p.K) break;
      y = rank[k] == r ? yv[k] : y;
      w = rank[k] == r ? wv[k] : w;
    }
    acc = fmaf(y, w, acc);
  }
  if (p.shared) acc += p.shared[t * p.D + d];
  return acc;
}

// The token's pairs in rank order (pair[r]: the pair added r-th) and their weights, for kernels
// that combine many columns of a token: stage them once, then MoeCombineLoad + MoeCombineSum per
// column.
__device__ __forceinline__ void MoeCombineOrder(const MoeCombineParams& p, int64_t t, int32_t* pair,
                                                float* weight) {
  int rank[kMoeMaxK];
  MoeCombineRanks(p, t, rank);
#pragma unroll
  for (int k = 0; k < kMoeMaxK; ++k) {
    if (k >= p.K) break;
    pair[rank[k]] = static_cast<int32_t>(t * p.K + k);
    weight[rank[k]] = p.weight[t * p.K + k];
  }
}
// MoeCombineAt's value from the staged order, in two halves (so that a kernel can load a token's
// rows ahead): MoeCombineLoad gathers column d of the pairs' rows in rank order, MoeCombineSum
// takes the same fmaf chain over the same (y, w) in rank order, then + the shared row's value
// (sh; read only when p.shared is set).
__device__ __forceinline__ void MoeCombineLoad(const MoeCombineParams& p, int64_t t,
                                               const int32_t* pair, int64_t d,
                                               float (&yv)[kMoeMaxK]) {
#pragma unroll
  for (int r = 0; r < kMoeMaxK; ++r) yv[r] = r < p.K ? p.y[pair[r] * p.D + d] : 0.0f;
}
__device__ __forceinline__ float MoeCombineSum(const MoeCombineParams& p,
                                               const float (&yv)[kMoeMaxK], const float* weight,
                                               float sh) {
  float acc = 0.0f;
#pragma unroll
  for (int r = 0; r < kMoeMaxK; ++r) {
    if (r >= p.K) break;
    acc = fmaf(yv[r], weight[r], acc);
  }
  if (p.shared) acc += sh;
  return acc;
}

}  // namespace dsinfer::backend::cuda
