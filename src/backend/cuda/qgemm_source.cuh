// The block source of the tiled FP8 / FP4 GEMMs (qgemm_sm90.cu on mma.sync, qgemm_wg_sm90.cu on
// wgmma), internal to backend/cuda: which weights a block multiplies and which rows it owns, and
// the shapes both take.
#pragma once

#include <cstdint>

#include "backend/cuda/qlinear.cuh"

namespace dsinfer::backend::cuda {

// Matrix d's weights w[d] and scales s[d] (d < kD: one weight or the fused SwiGLU pair), and the
// rows [begin, begin + count): the dense input's rows (0, m), or the pair list's stretch of the
// block's expert slot (blockIdx.z).
template <int kD>
struct QGemmSource {
  const uint8_t* w[kD];
  const uint8_t* s[kD];
  int64_t begin = 0, count = 0;
};

// After the grid-dependency wait (the routing comes from an earlier kernel). False: the block's
// expert slot is not active this launch (the block has nothing to do).
template <int kD, bool kExpert>
__device__ __forceinline__ bool ResolveQGemmSource(const QLinearArgs& p, QGemmSource<kD>* src) {
  if constexpr (kExpert) {
    const int slot = blockIdx.z;  // < max_slots <= experts: the reads below stay in their arrays
    if (slot >= *p.num_active) return false;
    const int e = p.active[slot];
    src->begin = p.offsets[slot];
    src->count = p.offsets[slot + 1] - src->begin;
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      src->w[d] = static_cast<const uint8_t*>(p.ew[d][e]);
      src->s[d] = static_cast<const uint8_t*>(p.es[d][e]);
    }
  } else {
    src->begin = 0;
    src->count = p.m;
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      src->w[d] = static_cast<const uint8_t*>(p.w[d]);
      src->s[d] = static_cast<const uint8_t*>(p.s[d]);
    }
  }
  return true;
}

// The shapes both tiled GEMMs take (host side): k in whole 64-column pairs; routed experts
// through the pair list (no grouped input); dense: FP8 only (dense FP4, which the V4 family does
// not have, is left to QLinearKernel), at most 65535 token tiles of `tokens_per_block`, 16-byte
// aligned weights, and grouped input only when each group spans whole blocks of `block_rows` (the
// block's input columns are one group's) starting on a 128-column act_quant block.
inline bool QGemmShapeSupported(const QLinearArgs& a, bool fp4, bool expert, int64_t block_rows,
                                int64_t tokens_per_block) {
  auto aligned16 = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (a.k % 64 != 0) return false;
  if (expert) return a.group_rows == 0 && a.pairs != nullptr && a.offsets != nullptr;
  if (fp4 || a.m <= 0 || a.m >= int64_t{65535} * tokens_per_block) return false;
  if (a.group_rows > 0 && (a.group_rows % block_rows != 0 || a.group_stride % 128 != 0))
    return false;
  return aligned16(a.w[0]) && (a.w[1] == nullptr || aligned16(a.w[1]));
}

}  // namespace dsinfer::backend::cuda
