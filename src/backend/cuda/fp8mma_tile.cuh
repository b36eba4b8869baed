// The FP8-instruction mode's gather tiles' shared pieces (internal to backend/cuda): the stage
// shape, the promotion and the slice bookkeeping, the launch arguments, a stage's layout and its
// A fragments. fp8mma_linear_sm90.cu (the gather tile, the TMA tile, the launchers) and
// fp8mma_experts_sm90.cu (the warp-specialized gather tile for routed experts) include it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda::fp8mma_tile {

using fp8mma::E2m1x4ToE4m3;
using fp8mma::SliceCols;

constexpr int kBM = 128, kBN = 128, kBK = 128;  // weight rows, tokens, columns of a stage

// ---- the promotion, shared by both kernels -----------------------------------------------------

// acc += r * (s_lo | s_hi) * s_x(token): s_lo for the fragment's row g, s_hi for g + 8; sx: the
// stage's kN tokens' scales as pairs (tokens 8 j + 2 t, + 1 of n8 tile j).
template <int kN>
__device__ __forceinline__ void Promote(const float (&r)[kN / 2], const float2* sx, int t,
                                        float s_lo, float s_hi, float (&acc)[kN / 2]) {
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const float2 xv = sx[4 * j + t];
    acc[4 * j] = fmaf(r[4 * j], s_lo * xv.x, acc[4 * j]);
    acc[4 * j + 1] = fmaf(r[4 * j + 1], s_lo * xv.y, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(r[4 * j + 2], s_hi * xv.x, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(r[4 * j + 3], s_hi * xv.y, acc[4 * j + 3]);
  }
}

// A ue8m0 byte's value (base/dtype.h E8M0ToFloat: 2^(b - 127), 255 NaN; b = 0 the subnormal).
__device__ __forceinline__ float Ue8m0(uint32_t b) {
  return b == 0     ? __uint_as_float(0x00400000u)
         : b == 255 ? __uint_as_float(0x7fc00000u)
                    : __uint_as_float(b << 23);
}

// The largest of a row's four group bytes (its 128-column block's e_max).
__device__ __forceinline__ uint32_t BlockExp(uint32_t g) {
  uint32_t m = __vmaxu4(g, g >> 16);
  m = __vmaxu4(m, m >> 8);
  return m & 0xffu;
}

// Slice bookkeeping (FP4 re-expressed in FP8's form takes FP8's slices): kb (a 128-column block,
// from kb0) ends a slice when the next block starts one or k ends; the first slice of the range is
// stored, the others added, in order.
constexpr int kSliceBlocks = SliceCols(false) / kBK;
__device__ __forceinline__ bool SliceEnds(int kb, int nblk) {
  return (kb + 1) % kSliceBlocks == 0 || kb + 1 == nblk;
}

// The register-total kernels' end of a 128-column block kb (of a launch's whole k): when a slice
// ends, its sum joins the total (the first slice's as it is) and the slice's sum restarts.
template <int kF>
__device__ __forceinline__ void FoldSlice(int kb, int nblk, float (&acc)[kF], float (&tot)[kF]) {
  if (!SliceEnds(kb, nblk)) return;
  const bool first = kb < kSliceBlocks;
#pragma unroll
  for (int i = 0; i < kF; ++i) {
    tot[i] = first ? acc[i] : tot[i] + acc[i];
    acc[i] = 0.0f;
  }
}

// ---- the gather tile ---------------------------------------------------------------------------

struct TileArgs {
  const uint8_t* w;       // dense weights (bytes, rows wpitch apart) and their scales
  const void* sc;         // (WeightRef::mma layout, sc_ld rows apart)
  const void* const* ew;  // routed experts: per-expert weights and scales
  const void* const* es;
  int64_t wpitch, sc_ld;
  int n, k;
  const uint8_t* xq;  // act_quant codes [x rows, ldq] (from the input's column 0)
  int64_t ldq;
  const float* xs_t;  // their scales [blocks][ld_t]
  int64_t ld_t;
  int xblk0;                   // the input's first 128-column block (a group of its own launch)
  int group_rows, group_blks;  // grouped input in one launch: weight rows r read x from block
                               // xblk0 + (r / group_rows) * group_blks (group_rows % 128 == 0)
  float* y;                    // y[out row * ldy + weight row]
  int64_t ldy;
  int m;                  // dense rows
  const int32_t* active;  // routed experts (ExpertLinearParams)
  const int32_t* num_active;
  const int32_t* offsets;
  const int32_t* pairs;
  int x_row_div;
  float* part;  // split by slice: part[(slice * m + row) * n + weight row]
  // FP4: the e4m3 magnitudes of the e2m1 codes 0..7 times 2^-d, d = 0..15 (lo: codes 0..3, hi:
  // 4..7; from d = 13 on zeros), which the kernels copy to shared memory (BlockFragments).
  uint2 fp4_tab[16];
};

constexpr int kTileThreads = 256, kTileStages = 4;

// A stage: the tokens' block [4 k32 steps][2 k halves][kN tokens][16 bytes] (WgmmaDescB's
// layout), the 128 weight rows (FP8: 128 bytes each, padded to 144; FP4: 64 bytes, padded to 80:
// conflict-free fragment loads), the rows' scales (512 bytes either way), the tokens' scales.
template <bool kFp4, int kN>
struct TileCfg {
  static constexpr int kXBytes = kN * kBK;
  static constexpr int kWPitch = kFp4 ? 80 : 144;
  static constexpr int kScOff = kXBytes + kBM * kWPitch;
  static constexpr int kSxOff = kScOff + 512;
  static constexpr int kStageBytes = (kSxOff + kN * 4 + 127) / 128 * 128;
  // After the stages: each thread's running total (kN / 2 floats, kTileThreads apart), the tile's
  // source rows and output rows.
  static constexpr int kTotalsOff = kTileStages * kStageBytes;
  static constexpr int kRowsOff = kTotalsOff + kN / 2 * kTileThreads * 4;
  static constexpr int kTabOff = kRowsOff + 2 * kN * 4;  // TileArgs::fp4_tab
  static constexpr int kSmem = kTabOff + 16 * 8;
};

// The byte offset in the weights' area of A register q (rows r, r + 8, r, r + 8; k + 0, + 0,
// + 16, + 16) of k32 step s for lane quad index t (FP8: 4 codes; FP4: the 2 bytes of 4 nibbles).
template <bool kFp4>
__host__ __device__ __forceinline__ int AOff(int r, int q, int s, int t) {
  const int row = r + 8 * (q % 2), k = 32 * s + 4 * t + 16 * (q / 2);
  return row * (kFp4 ? 80 : 144) + (kFp4 ? k / 2 : k);
}

// A stage's A fragments af[s][q] of k32 step s (rows r0 / r0 + 8 of the stage's weights wr) and
// the rows' scales of the 128-column block, from the stage's scales sc. FP8: the codes and the
// fp32 scales as stored. FP4 in FP8's form (io::QuantizedToMma): the e4m3 codes of the e2m1
// values times 2^(e_group - e_max) (the shift's magnitudes from tab), the scales 2^(e_max - 127)
// (sc: the 128 rows' four group bytes each).
template <bool kFp4>
__device__ __forceinline__ void BlockFragments(const uint8_t* wr, const uint8_t* sc,
                                               const uint2* tab, int r0, int t,
                                               uint32_t (&af)[4][4], float* s_lo, float* s_hi) {
  if constexpr (!kFp4) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        af[s][q] = *reinterpret_cast<const uint32_t*>(wr + AOff<false>(r0, q, s, t));
    const float* sw = reinterpret_cast<const float*>(sc);
    *s_lo = sw[r0];
    *s_hi = sw[r0 + 8];
    return;
  }
  const uint32_t* sg = reinterpret_cast<const uint32_t*>(sc);
  const uint32_t g_lo = sg[r0], g_hi = sg[r0 + 8];
  const uint32_t e_lo = BlockExp(g_lo), e_hi = BlockExp(g_hi);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint2 tl = tab[min(e_lo - ((g_lo >> (8 * s)) & 0xffu), 15u)];
    const uint2 th = tab[min(e_hi - ((g_hi >> (8 * s)) & 0xffu), 15u)];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint2 tb = q % 2 ? th : tl;  // (register q's row: r0 + 8 (q % 2))
      af[s][q] = E2m1x4ToE4m3(*reinterpret_cast<const uint16_t*>(wr + AOff<true>(r0, q, s, t)),
                              tb.x, tb.y);
    }
  }
  *s_lo = Ue8m0(e_lo);
  *s_hi = Ue8m0(e_hi);
}

// Launches kKernel(a) with `smem` bytes of dynamic shared memory (the kernel's limit raised on its
// first launch) and counts the launch.
template <auto kKernel, typename Args>
void LaunchCounted(dim3 grid, int threads, int smem, std::atomic<int64_t>& count, const Args& a,
                   StreamHandle stream) {
  static const bool attr = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)attr;
  LaunchKernel(kKernel, grid, dim3(threads), smem, stream, a);
  CUDA_CHECK_LAUNCH();
  ++count;
}

// A routed experts' launch's expected pairs a slot, and its grid's token tile stride for tiles of
// `tile` tokens: about two blocks a slot's expected tiles (each block strides over its slot's
// tiles), 1 to 64.
inline int64_t ExpertPairsPerSlot(int64_t pairs, int slots) { return (pairs + slots - 1) / slots; }
inline unsigned ExpertTileStride(int64_t per_slot, int tile) {
  return static_cast<unsigned>(
      std::min<int64_t>(std::max<int64_t>(1, (2 * per_slot + tile - 1) / tile), 64));
}

// The warp-specialized gather tile for routed experts over `grid` (row blocks, expert slots,
// token tile stride): fp8mma_experts_sm90.cu.
void LaunchMmaWsExperts(const TileArgs& t, bool fp4, dim3 grid, StreamHandle stream);
// The same tile fed by the TMA: the slots' pairs' act_quant codes and scales first gathered into
// list order (into aq after the x_rows act_quant rows), then one warp's bulk copies a stage. False
// (nothing launched) where it does not apply: k not whole 128-column blocks, or aq smaller than
// MmaExpertQuantBytes / MmaExpertScaleCount. `gather` false: aq holds the gathered rows already
// (the launch before, on the same x codes and pairs).
bool TryLaunchMmaWsTmaExperts(const TileArgs& t, bool fp4, const ActQuantScratch& aq,
                              int64_t x_rows, int64_t total_pairs, int max_slots, dim3 grid,
                              bool gather, StreamHandle stream);

}  // namespace dsinfer::backend::cuda::fp8mma_tile
