// Experiment (issue 27): the dense FP8 linear on Hopper's FP8 instructions, checked bit for bit
// against the CPU model of them (backend/wgmma_fp8.h) and timed at prefill sizes, to tell what an
// FP8-instruction numerics mode would buy before any kernel of src/ changes.
//
// Per k slice (fp8_mma.cuh's SliceCols: 512 columns FP8, 256 FP4, as bench_fp8_gemv's decode
// kernel cuts k, so the two give a row the same bits), acc = sum over its 128-column blocks b, in
// order, of fmaf(r_b, s_w * s_x, acc), the slices added in order; r_b = four
// wgmma m64n128k32 .e4m3 steps chained from zero over the block (k order), s_w the weight's
// 128 x 128 block scale, s_x the token's act_quant scale of the block: DeepGEMM's promotion every
// 128 k, the chains a function of (n, k) only, so a row's bits do not depend on the batch. The
// operands are the bytes as stored (e4m3 weights, act_quant's e4m3 activations): no conversion.
//
// The kernel (a first form, not tuned): a block of two warpgroups owns 128 weight rows (64 each:
// the wgmma's M, A from registers, loaded from shared memory rows padded to 144 bytes) and 128
// tokens (the wgmma's N, B from shared memory in the no-swizzle K-major layout WgmmaDescB reads,
// [4 k32 steps][2 k halves][128 tokens][16 bytes]); a 4-stage cp.async pipeline of 128-column
// blocks with one block barrier each.
//
// Reports per shape (flash-l8's dense FP8 linears at M tokens): us per launch (CUDA-graph
// replay, as bench_qgemm times), TFLOP/s and the ratio to the FP8 dense peak (1,979 TFLOP/s, H100 /
// H200 SXM), and the bitwise mismatches of a sample of elements against the model (the model's own
// check: probe_fp8_mma_bits, fact 5). Today's kernel on the same shapes: bench_qgemm --tokens M.
// First, on the host (alone with --host-check: no device needed), the kernel's staging and
// fragment addressing read back through wgmma's operand layouts (HostCheck).
//   bench_fp8_gemm [--tokens 8192] [--only NAME] [--kernel tma|first] [--sample 4096]
//                  [--host-check]
// Exit 0 if every sampled element matches the model, 1 if not, 2 without an sm_90 device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"
#include "backend/quant_codec.h"
#include "fp8_operands.h"
#include "gpu_bench.h"  // MedianGraphUs
#include "probe_bits.h"

namespace {

namespace cu = dsinfer::backend::cuda;
namespace qc = dsinfer::backend::qc;
using cu::fp8mma::E2m1x4ToE4m3;
using cu::fp8mma::SliceCols;
using cu::fp8mma::WgmmaFp8N128;
using cu::fp8mma::WgmmaFp8N128Ss;
using fp8bench::ModelElement;
using fp8bench::Operand;
using fp8bench::QuantizeActivations;
using fp8bench::QuantizeWeights;

// Launches per timed CUDA graph (bench_qgemm's count: the same measure as its figures).
constexpr int kGraphLaunches = 5;
constexpr int kThreads = 256, kBM = 128, kBN = 128, kBK = 128, kStages = 4;
constexpr double kFp8PeakTflops = 1979.0;

// A stage: the tokens' block [4 k32 steps][2 k halves][128 tokens][16 bytes] first (the layout
// WgmmaDescB reads), then the 128 weight rows (FP8: 128 bytes each, padded to 144; FP4: 64 bytes
// of nibble pairs, padded to 80: conflict-free fragment loads either way), then FP4's group
// scales [128 rows][4 floats], the tokens' act_quant scales and (FP8) the weight block's scale.
template <bool kFp4>
struct Cfg {
  static constexpr int kXBytes = kBN * kBK;
  static constexpr int kWPitch = kFp4 ? 80 : 144;
  static constexpr int kSgOff = kXBytes + kBM * kWPitch;
  static constexpr int kSxOff = kSgOff + (kFp4 ? kBM * 16 : 0);
  static constexpr int kStageBytes = (kSxOff + kBN * 4 + 16 + 1023) / 1024 * 1024;
  // After the stages: each thread's running total of the k slices (64 floats, kThreads apart).
  static constexpr int kSmem = kStages * kStageBytes + 64 * kThreads * 4;
};

// Where the kernel puts and finds things in a stage (shared by the kernel and the host check):
// token i's 16-byte chunk ch of the block (k 16 ch .. + 15) in the tokens' area, weight row r's
// chunk ch in the weights' area, and the byte offset in the weights' area of the A register q
// (0..3: rows r, r + 8, r, r + 8; k + 0, + 0, + 16, + 16) of k32 step s for lane quad index t
// (FP8: 4 codes; FP4: the 2 bytes of 4 nibbles).
__host__ __device__ __forceinline__ int XStageOff(int i, int ch) {
  return (ch / 2) * (kBN * 32) + (ch % 2) * (kBN * 16) + i * 16;
}
template <bool kFp4>
__host__ __device__ __forceinline__ int WStageOff(int r, int ch) {
  return r * Cfg<kFp4>::kWPitch + ch * 16;
}
template <bool kFp4>
__host__ __device__ __forceinline__ int AOff(int r, int q, int s, int t) {
  const int row = r + 8 * (q % 2), k = 32 * s + 4 * t + 16 * (q / 2);
  return row * Cfg<kFp4>::kWPitch + (kFp4 ? k / 2 : k);
}

// A unit's promotion, the same in both forms: acc += r * (s_lo | s_hi) * s_x(token), s_lo for
// the fragment's row g, s_hi for g + 8; sx: the stage's 128 tokens' scales as pairs (tokens
// 8 j + 2 t, + 1 of n8 tile j).
__device__ __forceinline__ void Promote(const float (&r)[64], const float2* sx, int t, float s_lo,
                                        float s_hi, float (&acc)[64]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const float2 xv = sx[4 * j + t];
    acc[4 * j] = fmaf(r[4 * j], s_lo * xv.x, acc[4 * j]);
    acc[4 * j + 1] = fmaf(r[4 * j + 1], s_lo * xv.y, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(r[4 * j + 2], s_hi * xv.x, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(r[4 * j + 3], s_hi * xv.y, acc[4 * j + 3]);
  }
}

// x: [m, k] e4m3 (act_quant's codes), xs: [m, k / 128] scales. FP8: w [n, k] e4m3, ws [n / 128,
// k / 128] block scales; per 128-column block r = 4 chained steps, acc = fmaf(r, s_w * s_x, acc).
// FP4: w [n, k / 2] e2m1 pairs (the even k in the low nibble), ws [n, k / 32] group scales; per
// 32-column group r = one step, acc = fmaf(r, s_g * s_x, acc). y: [m, n]; n, k multiples of 128.
template <bool kFp4>
__global__ void __launch_bounds__(kThreads, 1)
    Fp8GemmKernel(const uint8_t* __restrict__ x, const float* __restrict__ xs,
                  const uint8_t* __restrict__ w, const float* __restrict__ ws,
                  float* __restrict__ y, int m, int n, int k) {
  using C = Cfg<kFp4>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kBM, tok0 = blockIdx.y * kBN, nblk = k / kBK;
  const int64_t wrow = kFp4 ? k / 2 : k;  // bytes per weight row
  auto stage = [&](int s) { return smem + s * C::kStageBytes; };
  auto load = [&](int s, int kb) {
    uint8_t* st = stage(s);
    for (int c = threadIdx.x; c < kBN * 8; c += kThreads) {  // token i's 16-byte chunk ch
      const int i = c / 8, ch = c % 8;
      const bool ok = tok0 + i < m;
      cu::CpAsync16(st + XStageOff(i, ch),
                    ok ? x + static_cast<int64_t>(tok0 + i) * k + kb * kBK + ch * 16 : x, ok);
    }
    constexpr int kChunks = kFp4 ? 4 : 8;  // 16-byte chunks of a row's block
    for (int c = threadIdx.x; c < kBM * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      cu::CpAsync16(st + C::kXBytes + WStageOff<kFp4>(r, ch),
                    w + (row0 + r) * wrow + kb * (kBK * kChunks / 8) + ch * 16, true);
    }
    if constexpr (kFp4) {  // the rows' 4 group scales of the block
      if (threadIdx.x < kBM)
        cu::CpAsync16(st + C::kSgOff + threadIdx.x * 16,
                      ws + static_cast<int64_t>(row0 + threadIdx.x) * (k / 32) + kb * 4, true);
    }
    float* sx = reinterpret_cast<float*>(st + C::kSxOff);
    if (threadIdx.x < kBN) {
      const bool ok = tok0 + threadIdx.x < m;
      cu::CpAsync4(sx + threadIdx.x,
                   ok ? xs + static_cast<int64_t>(tok0 + threadIdx.x) * nblk + kb : xs, ok);
    } else if (!kFp4 && threadIdx.x == kBN) {
      cu::CpAsync4(sx + kBN, ws + static_cast<int64_t>(row0 / kBM) * nblk + kb, true);
    }
  };
  // The warp's rows of the block: r0 (A rows g) and r0 + 8.
  const int r0 = (warp / 4) * 64 + (warp % 4) * 16 + g;
  float acc[64], r[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = r[i] = 0.0f;
  float* const totals = reinterpret_cast<float*>(smem + kStages * C::kStageBytes) + threadIdx.x;
  constexpr int kSliceBlocks = SliceCols(kFp4) / kBK;
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nblk) load(s, s);
    cu::CpAsyncCommit();
  }
  for (int kb = 0; kb < nblk; ++kb) {
    cu::CpAsyncWait<kStages - 2>();  // this thread's copies of block kb have landed
    cu::FenceProxyAsync();           // and are visible to wgmma's (async-proxy) reads
    __syncthreads();                 // every thread's; every warp done with the stage refilled next
    if (kb + kStages - 1 < nblk) load((kb + kStages - 1) % kStages, kb + kStages - 1);
    cu::CpAsyncCommit();
    const uint8_t* st = stage(kb % kStages);
    const uint8_t* wr = st + C::kXBytes;
    const float2* sx = reinterpret_cast<const float2*>(st + C::kSxOff);  // then the weight scale
    const uint32_t xa = cu::SmemAddr(st);
    // Step s's A fragment: rows r0 / r0 + 8, k 32 s + 4 t .. + 3 and + 16.
    uint32_t af[4][4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        if constexpr (kFp4) {
          af[s][q] = E2m1x4ToE4m3(*reinterpret_cast<const uint16_t*>(wr + AOff<true>(r0, q, s, t)));
        } else {
          af[s][q] = *reinterpret_cast<const uint32_t*>(wr + AOff<false>(r0, q, s, t));
        }
      }
    }
    if constexpr (kFp4) {
      // A group's step from zero, then its promotion (the group scales of rows r0 / r0 + 8).
      const float* sg = reinterpret_cast<const float*>(st + C::kSgOff);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        cu::WgmmaFence();
        WgmmaFp8N128(r, af[s], cu::WgmmaDescB<kBN>(xa + s * kBN * 32), 0);
        cu::WgmmaCommit();
        cu::WgmmaWait<0>();
        cu::WgmmaFenceOperand(r);
        Promote(r, sx, t, sg[r0 * 4 + s], sg[(r0 + 8) * 4 + s], acc);
      }
    } else {
      cu::WgmmaFence();
#pragma unroll
      for (int s = 0; s < 4; ++s) WgmmaFp8N128(r, af[s], cu::WgmmaDescB<kBN>(xa + s * kBN * 32), s);
      cu::WgmmaCommit();
      cu::WgmmaWait<0>();
      cu::WgmmaFenceOperand(r);
      const float sw = reinterpret_cast<const float*>(sx)[kBN];
      Promote(r, sx, t, sw, sw, acc);
    }
    if ((kb + 1) % kSliceBlocks == 0 || kb + 1 == nblk) {  // a k slice ends: into the total
      const bool first = kb < kSliceBlocks;
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        totals[i * kThreads] = first ? acc[i] : totals[i * kThreads] + acc[i];
        acc[i] = 0.0f;
      }
    }
  }
  cu::CpAsyncWait<0>();
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = tok0 + 8 * j + 2 * t + e % 2, row = row0 + r0 + 8 * (e / 2);
      if (tok < m) y[static_cast<int64_t>(tok) * n + row] = totals[(4 * j + e) * kThreads];
    }
  }
}

// The second form (session 39), warp-specialized as src's QGemmWsKernel (qgemm_ws_sm90.cu)
// moves data: a producer warp fills a ring of stages, each a 128-column block of the 128 tokens'
// codes (a 128 x 128-byte TMA box in the 128-byte swizzle that wgmma's descriptor reads), of the
// block's 128 weight rows and of the scales, completing on the stage's mbarrier; two consumer
// warpgroups (64 rows each) compute, promote, and release the stage; a slice's sum joins the
// total in registers. Blocks are persistent and walk the output tiles in groups of kGroupRows row
// blocks (QGemmWsKernel's order). The same operations per element as Fp8GemmKernel, so the same
// bits.
//   FP8: the weights' box is 128 x 128 bytes in the 128-byte swizzle too: the block's four
//   m64n128k32 .e4m3 steps take both operands from shared memory, chained from zero; then one
//   promotion (acc = fmaf(r, s_w * s_x, acc)).
//   FP4: the weights' box is 128 rows x 64 bytes (unswizzled: the fragments' 2-byte loads meet
//   4-way bank conflicts), the rows' group scales one 2 KB bulk copy (host-transposed to
//   [k / 128][n][4]); per 32-column group the warp's A fragment is loaded and its e2m1 codes
//   turned into e4m3 in registers, one step from zero, then its promotion (acc = fmaf(r, s_g *
//   s_x, acc)). (Loading the next group's fragment while a step runs spilled 148 bytes.)
namespace ws {
constexpr int kConsumers = 256, kThreads = kConsumers + 128, kStages = 5, kGroupRows = 8;
// The byte offset in the FP4 weights' box ([128 rows][64 bytes], unswizzled) of A register q
// (rows r, r + 8, r, r + 8; k + 0, + 0, + 16, + 16: two bytes of four e2m1 codes) of group s for
// lane quad index t.
__host__ __device__ __forceinline__ int Fp4AOff(int r, int q, int s, int t) {
  return (r + 8 * (q % 2)) * (kBK / 2) + 16 * s + 2 * t + 8 * (q / 2);
}

template <bool kFp4>
struct Lay {
  static constexpr int kXBytes = kBN * kBK, kWBytes = kBM * (kFp4 ? kBK / 2 : kBK);
  static constexpr int kSgBytes = kFp4 ? kBM * 16 : 0, kSxBytes = kBN * 4;
  static constexpr int kStageBytes = (kXBytes + kWBytes + kSgBytes + kSxBytes + 1023) / 1024 * 1024;
  static constexpr int kSmem = kStages * kStageBytes + 2 * kStages * 8 + 1024;
};

struct Args {
  CUtensorMap xmap, wmap;  // x [m, k] e4m3: boxes 128 rows x 128 bytes; w: 128 rows x 128 (FP8)
                           // or 64 (FP4: [n, k / 2] e2m1 pairs) bytes
  const float* xs_t;       // [k / 128, m]
  const float* ws;         // FP8: [n / 128, k / 128]; FP4: [k / 128, n, 4] (group scales)
  float* y;                // [m, n]
  int m, n, k;
};

template <bool kFp4>
__global__ void __launch_bounds__(kThreads, 1) Fp8GemmTmaKernel(const __grid_constant__ Args a) {
  using L = Lay<kFp4>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  auto x_at = [&](int s) { return smem + s * L::kStageBytes; };
  auto w_at = [&](int s) { return smem + s * L::kStageBytes + L::kXBytes; };
  auto sg_at = [&](int s) {
    return reinterpret_cast<const float*>(smem + s * L::kStageBytes + L::kXBytes + L::kWBytes);
  };
  auto sx_at = [&](int s) {
    return smem + s * L::kStageBytes + L::kXBytes + L::kWBytes + L::kSgBytes;
  };
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * L::kStageBytes);
  uint64_t* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cu::MbarInit(full + s, 1);
      cu::MbarInit(empty + s, kConsumers / 32);
    }
    cu::FenceMbarInit();
  }
  __syncthreads();
  const int nblk = a.k / kBK, row_blocks = a.n / kBM, token_tiles = a.m / kBN;
  const int ntiles = row_blocks * token_tiles;
  auto coords = [&](int t, int* rb, int* tt) {  // QGemmWsKernel's TileCoords
    const int per_group = kGroupRows * token_tiles, first = (t / per_group) * kGroupRows;
    const int r = t % per_group, size = min(kGroupRows, row_blocks - first);
    *tt = r / size;
    *rb = first + r % size;
  };
  if (warp >= kConsumers / 32) {  // the producer warpgroup; one lane of it works
    cu::SetMaxNReg<false, 40>();
    if (warp != kConsumers / 32 || lane != 0) return;
    uint32_t fills = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
      int rb, tt;
      coords(t, &rb, &tt);
      for (int kb = 0; kb < nblk; ++kb, ++fills) {
        const int s = static_cast<int>(fills % kStages);
        cu::RingWaitEmpty<kStages>(empty, fills);
        cu::MbarArriveExpectTx(full + s, L::kXBytes + L::kWBytes + L::kSgBytes + L::kSxBytes);
        cu::TmaLoad2d(x_at(s), &a.xmap, kb * kBK, tt * kBN, full + s);
        cu::TmaLoad2d(w_at(s), &a.wmap, kb * (kFp4 ? kBK / 2 : kBK), rb * kBM, full + s);
        if constexpr (kFp4)
          cu::BulkLoad(w_at(s) + L::kWBytes, a.ws + (static_cast<int64_t>(kb) * a.n + rb * kBM) * 4,
                       L::kSgBytes, full + s);
        cu::BulkLoad(sx_at(s), a.xs_t + static_cast<int64_t>(kb) * a.m + tt * kBN, L::kSxBytes,
                     full + s);
      }
    }
    return;
  }
  cu::SetMaxNReg<true, 232>();
  const int wg = warp / 4, g = lane / 4, t4 = lane % 4;
  const int r0 = wg * 64 + (warp % 4) * 16 + g;  // the thread's rows r0, r0 + 8 of the block
  constexpr int kSliceBlocks = SliceCols(kFp4) / kBK;
  // FP4: group s's A fragment (rows r0 / r0 + 8, k 32 s + 4 t4 .. + 3 and + 16) as e4m3.
  auto fp4_frag = [&](const uint8_t* w, int s, uint32_t(&af)[4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q)
      af[q] = E2m1x4ToE4m3(*reinterpret_cast<const uint16_t*>(w + Fp4AOff(r0, q, s, t4)));
  };
  uint32_t uses = 0;
  for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int rb, tt;
    coords(t, &rb, &tt);
    float acc[64], tot[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    for (int kb = 0; kb < nblk; ++kb, ++uses) {
      const int st = static_cast<int>(uses % kStages);
      float sw = 0.0f;
      if constexpr (!kFp4) sw = __ldg(a.ws + static_cast<int64_t>(rb) * nblk + kb);
      cu::RingWaitFull<kStages>(full, uses);
      const uint32_t xb = cu::SmemAddr(x_at(st));
      const float2* sx = reinterpret_cast<const float2*>(sx_at(st));
      float r[64];
      if constexpr (kFp4) {
        const float* sg = sg_at(st);
#pragma unroll 1  // (unrolled, the groups share the tokens' scales in registers and spill)
        for (int s = 0; s < 4; ++s) {
          uint32_t af[4];
          fp4_frag(w_at(st), s, af);
          cu::WgmmaFence();
          WgmmaFp8N128(r, af, cu::WgmmaDescSw128(xb + s * 32), 0);
          cu::WgmmaCommit();
          cu::WgmmaWait<0>();
          cu::WgmmaFenceOperand(r);
          Promote(r, sx, t4, sg[r0 * 4 + s], sg[(r0 + 8) * 4 + s], acc);
        }
      } else {
        const uint32_t wb = cu::SmemAddr(w_at(st)) + wg * 64 * kBK;
        cu::WgmmaFence();
#pragma unroll
        for (int q = 0; q < 4; ++q)
          WgmmaFp8N128Ss(r, cu::WgmmaDescSw128(wb + q * 32), cu::WgmmaDescSw128(xb + q * 32), q);
        cu::WgmmaCommit();
        cu::WgmmaWait<0>();
        cu::WgmmaFenceOperand(r);
        Promote(r, sx, t4, sw, sw, acc);
      }
      __syncwarp();
      if (lane == 0) cu::MbarArrive(empty + st);             // the warp is done with the stage
      if ((kb + 1) % kSliceBlocks == 0 || kb + 1 == nblk) {  // a slice's sum joins the total
        const bool first = kb < kSliceBlocks;
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          tot[i] = first ? acc[i] : tot[i] + acc[i];
          acc[i] = 0.0f;
        }
      }
    }
    // C fragment (n8 tile j, register e): row r0 + 8 (e / 2), token 8 j + 2 t4 + e % 2.
    const int row = rb * kBM + r0;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        a.y[static_cast<int64_t>(tt * kBN + 8 * j + 2 * t4 + e % 2) * a.n + row + 8 * (e / 2)] =
            tot[4 * j + e];
  }
}

// Launches over a persistent grid; false if the driver refuses a tensor map. ws as Args says.
template <bool kFp4>
bool Launch(const uint8_t* x, const float* xs_t, const uint8_t* w, const float* ws, float* y, int m,
            int n, int k, int sms, cudaStream_t stream) {
  CUtensorMap xmap, wmap;
  const int wbytes = kFp4 ? k / 2 : k;
  if (!cu::EncodeTensorMap2d(&xmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, x, k, m, k, kBK, kBN,
                             CU_TENSOR_MAP_SWIZZLE_128B) ||
      !cu::EncodeTensorMap2d(&wmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, w, wbytes, n, wbytes,
                             kFp4 ? kBK / 2 : kBK, kBM,
                             kFp4 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B))
    return false;
  const Args a{xmap, wmap, xs_t, ws, y, m, n, k};
  const int tiles = (n / kBM) * (m / kBN);
  Fp8GemmTmaKernel<kFp4><<<std::min(tiles, sms), kThreads, Lay<kFp4>::kSmem, stream>>>(a);
  return true;
}
}  // namespace ws

struct Shape {
  const char* name;
  int n, k;
  bool fp4;
};

// On the host: whether the operands the kernel stages reach the instruction as intended. One
// block's token and weight codes are written where the kernel writes them (XStageOff, WStageOff)
// and read back as wgmma reads them: B through WgmmaDescB's geometry (token n's k of step s at
// s * N * 32 + (k / 16) * N * 16 + n * 16 + k % 16), A from the registers the kernel loads (AOff,
// E2m1x4ToE4m3) under the e4m3 A-fragment layout (warp w, lane (g, t), register q: row 16 w + g +
// 8 (q % 2), k 32 s + 4 t + 16 (q / 2) + byte); every code must come back. Also every 16-bit FP4
// input of the conversion against the e2m1 table. Prints what fails; true if nothing does.
template <bool kFp4>
bool HostCheckLayout(std::mt19937& rng) {
  using C = Cfg<kFp4>;
  auto e4m3 = [&]() {
    for (;;) {
      const uint8_t b = static_cast<uint8_t>(rng() & 0xffu);
      if ((b & 0x7f) != 0x7f) return b;
    }
  };
  std::vector<uint8_t> x(kBN * kBK), wcodes(kBM * kBK), wbytes(kBM * (kFp4 ? kBK / 2 : kBK), 0);
  for (auto& v : x) v = e4m3();
  for (int i = 0; i < kBM * kBK; ++i) {
    if (kFp4) {
      const uint8_t nib = static_cast<uint8_t>(rng() & 15u);
      wbytes[i / 2] |= static_cast<uint8_t>(nib << (4 * (i % 2)));
      wcodes[i] = nib == 8 ? 0x80 : qc::FloatToE4m3(qc::E2m1Value(nib));
    } else {
      wcodes[i] = wbytes[i] = e4m3();
    }
  }
  std::vector<uint8_t> st(C::kStageBytes, 0);
  for (int i = 0; i < kBN; ++i)
    for (int ch = 0; ch < 8; ++ch) std::memcpy(&st[XStageOff(i, ch)], &x[i * kBK + ch * 16], 16);
  const int chunks = kFp4 ? 4 : 8;
  for (int r = 0; r < kBM; ++r)
    for (int ch = 0; ch < chunks; ++ch)
      std::memcpy(&st[C::kXBytes + WStageOff<kFp4>(r, ch)], &wbytes[r * chunks * 16 + ch * 16], 16);
  int bad = 0;
  for (int s = 0; s < 4; ++s)
    for (int n = 0; n < kBN; ++n)
      for (int k = 0; k < 32; ++k)
        bad += st[s * kBN * 32 + (k / 16) * kBN * 16 + n * 16 + k % 16] != x[n * kBK + 32 * s + k];
  if (bad != 0) std::printf("host check (%s): %d B codes misplaced\n", kFp4 ? "fp4" : "fp8", bad);
  int bad_a = 0;
  for (int wg = 0; wg < 2; ++wg)
    for (int w = 0; w < 4; ++w)
      for (int lane = 0; lane < 32; ++lane)
        for (int s = 0; s < 4; ++s)
          for (int q = 0; q < 4; ++q) {
            const int g = lane / 4, t = lane % 4, r0 = wg * 64 + w * 16 + g;
            uint32_t reg;
            const uint8_t* src = &st[C::kXBytes + AOff<kFp4>(r0, q, s, t)];
            if (kFp4) {
              reg = E2m1x4ToE4m3(static_cast<uint32_t>(src[0]) |
                                 (static_cast<uint32_t>(src[1]) << 8));
            } else {
              std::memcpy(&reg, src, 4);
            }
            for (int b = 0; b < 4; ++b) {
              const int row = wg * 64 + 16 * w + g + 8 * (q % 2),
                        k = 32 * s + 4 * t + 16 * (q / 2) + b;
              bad_a += static_cast<uint8_t>(reg >> (8 * b)) != wcodes[row * kBK + k];
            }
          }
  if (bad_a != 0) std::printf("host check (%s): %d A codes wrong\n", kFp4 ? "fp4" : "fp8", bad_a);
  return bad == 0 && bad_a == 0;
}

// The TMA kernel's FP4 fragments: a box of random e2m1 codes in the natural [row][k / 2] layout
// the unswizzled TMA box has, read as the kernel reads it (ws::Fp4AOff, E2m1x4ToE4m3) against the
// e4m3 A-fragment layout.
bool HostCheckTmaFp4(std::mt19937& rng) {
  std::vector<uint8_t> box(kBM * kBK / 2), codes(kBM * kBK);
  for (int i = 0; i < kBM * kBK; ++i) {
    const uint8_t nib = static_cast<uint8_t>(rng() & 15u);
    box[i / 2] |= static_cast<uint8_t>(nib << (4 * (i % 2)));
    codes[i] = nib == 8 ? 0x80 : qc::FloatToE4m3(qc::E2m1Value(nib));
  }
  int bad = 0;
  for (int warp = 0; warp < 8; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int s = 0; s < 4; ++s)
        for (int q = 0; q < 4; ++q) {
          const int g = lane / 4, t = lane % 4, r0 = (warp / 4) * 64 + (warp % 4) * 16 + g;
          const int off = ws::Fp4AOff(r0, q, s, t);
          const uint32_t reg = E2m1x4ToE4m3(static_cast<uint32_t>(box[off]) |
                                            (static_cast<uint32_t>(box[off + 1]) << 8));
          for (int b = 0; b < 4; ++b) {
            const int row = r0 + 8 * (q % 2), k = 32 * s + 4 * t + 16 * (q / 2) + b;
            bad += static_cast<uint8_t>(reg >> (8 * b)) != codes[row * kBK + k];
          }
        }
  if (bad != 0) std::printf("host check (tma fp4): %d A codes wrong\n", bad);
  return bad == 0;
}

bool HostCheck() {
  int bad = 0;
  for (uint32_t v = 0; v < 65536; ++v) {
    const uint32_t got = E2m1x4ToE4m3(v);
    for (int i = 0; i < 4; ++i) {
      const uint8_t nib = static_cast<uint8_t>((v >> (4 * i)) & 15u);
      const uint8_t want = nib == 8 ? 0x80 : qc::FloatToE4m3(qc::E2m1Value(nib));  // (-0: 0x80)
      bad += static_cast<uint8_t>(got >> (8 * i)) != want;
    }
  }
  if (bad != 0) std::printf("host check: %d e2m1 -> e4m3 conversions wrong\n", bad);
  std::mt19937 rng(38);
  const bool fp8_ok = HostCheckLayout<false>(rng), fp4_ok = HostCheckLayout<true>(rng);
  const bool tma_ok = HostCheckTmaFp4(rng);
  return bad == 0 && fp8_ok && fp4_ok && tma_ok;
}

}  // namespace

int main(int argc, char** argv) {
  int m = 8192, sample = 4096;
  bool host_only = false;
  std::string only, kernel_form = "tma";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokens" && has_value) {
      m = std::atoi(argv[++i]);
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--kernel" && has_value) {
      kernel_form = argv[++i];
      if (kernel_form != "tma" && kernel_form != "first") {
        std::fprintf(stderr, "--kernel: tma or first, not %s\n", kernel_form.c_str());
        return 2;
      }
    } else if (a == "--sample" && has_value) {
      sample = std::atoi(argv[++i]);
    } else if (a == "--host-check") {
      host_only = true;
    } else {
      std::fprintf(stderr, "bench_fp8_gemm: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (m < 1 || sample < 0) {
    std::fprintf(stderr, "bench_fp8_gemm: --tokens positive, --sample >= 0\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (const int rc = probe::StartAfterHostCheck("fp8_gemm", HostCheck(), host_only, &prop); rc >= 0)
    return rc;
  PROBE_CUDA_CHECK(cudaFuncSetAttribute(
      Fp8GemmKernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg<false>::kSmem));
  PROBE_CUDA_CHECK(cudaFuncSetAttribute(
      Fp8GemmKernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg<true>::kSmem));
  PROBE_CUDA_CHECK(cudaFuncSetAttribute(ws::Fp8GemmTmaKernel<false>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        ws::Lay<false>::kSmem));
  PROBE_CUDA_CHECK(cudaFuncSetAttribute(ws::Fp8GemmTmaKernel<true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        ws::Lay<true>::kSmem));
  if (kernel_form == "tma" && m % kBN != 0) {
    std::fprintf(stderr, "--kernel tma: --tokens must be a multiple of %d\n", kBN);
    return 2;
  }
  const Shape shapes[] = {{"wq_a", 1024, 4096},
                          {"wq_b", 32768, 1024},
                          {"wkv", 512, 4096},
                          {"idx_wq_b", 8192, 1024},
                          {"wo_b", 4096, 8192},
                          {"shared_w13", 4096, 4096},
                          {"shared_w2", 4096, 2048},
                          {"expert_w13", 4096, 4096, true},
                          {"expert_w2", 4096, 2048, true}};
  std::printf("{\"bench\": \"fp8_gemm_setup\", \"device\": \"%s\", \"tokens\": %d}\n", prop.name,
              m);
  bool all_ok = true;
  std::mt19937 rng(20261205u);
  cu::Stream st;
  for (const Shape& sh : shapes) {
    if (!only.empty() && only != sh.name) continue;
    const Operand x = QuantizeActivations(m, sh.k, rng);
    const Operand w = QuantizeWeights(sh.n, sh.k, sh.fp4, rng);
    uint8_t *dx = probe::ToDevice(x.code), *dw = probe::ToDevice(w.code);
    std::vector<float> xs_t(x.scale.size());  // [k / 128, m]: the TMA kernel's layout
    for (int i = 0; i < m; ++i)
      for (int b = 0; b < sh.k / kBK; ++b)
        xs_t[static_cast<size_t>(b) * m + i] = x.Scale(i, b * kBK);
    const bool tma = kernel_form == "tma";
    std::vector<float> sg_t;  // FP4 group scales [k / 128][n][4]: the TMA kernel's layout
    if (sh.fp4) {
      sg_t.resize(w.scale.size());
      for (int r = 0; r < sh.n; ++r)
        for (int g = 0; g < sh.k / 32; ++g)
          sg_t[(static_cast<size_t>(g / 4) * sh.n + r) * 4 + g % 4] =
              w.scale[static_cast<size_t>(r) * (sh.k / 32) + g];
    }
    float* dxs = probe::ToDevice(tma ? xs_t : x.scale);
    float* dws = probe::ToDevice(tma && sh.fp4 ? sg_t : w.scale);
    float* dy = probe::DeviceFloats(static_cast<size_t>(m) * sh.n);
    const dim3 grid(sh.n / kBM, (m + kBN - 1) / kBN);
    auto launch = [&](int) {
      if (tma) {
        const bool ok = sh.fp4 ? ws::Launch<true>(dx, dxs, dw, dws, dy, m, sh.n, sh.k,
                                                  prop.multiProcessorCount, st.get())
                               : ws::Launch<false>(dx, dxs, dw, dws, dy, m, sh.n, sh.k,
                                                   prop.multiProcessorCount, st.get());
        if (!ok) {
          std::fprintf(stderr, "the driver refused a tensor map\n");
          std::exit(1);
        }
      } else if (sh.fp4) {
        Fp8GemmKernel<true>
            <<<grid, kThreads, Cfg<true>::kSmem, st.get()>>>(dx, dxs, dw, dws, dy, m, sh.n, sh.k);
      } else {
        Fp8GemmKernel<false>
            <<<grid, kThreads, Cfg<false>::kSmem, st.get()>>>(dx, dxs, dw, dws, dy, m, sh.n, sh.k);
      }
    };
    launch(0);
    PROBE_CUDA_CHECK(cudaGetLastError());
    st.Synchronize();
    const double med = dsinfer::bench::MedianGraphUs(launch, kGraphLaunches, st.get());
    const std::vector<float> y = probe::FromDevice(dy, static_cast<size_t>(m) * sh.n);
    // A sample of elements against the model, over the host's threads.
    std::vector<std::pair<int, int>> picks(sample);
    for (auto& p : picks) p = {static_cast<int>(rng() % m), static_cast<int>(rng() % sh.n)};
    std::vector<float> want(sample), got(sample);
    fp8bench::ParallelFor(sample, [&](int64_t i) {
      want[i] = ModelElement(x, w, picks[i].first, picks[i].second);
      got[i] = y[static_cast<size_t>(picks[i].first) * sh.n + picks[i].second];
    });
    const int64_t mismatches = probe::TallyMismatches(got, want, false, 3, [&](size_t i) {
                                 std::printf("  %s: token %d row %d: %a vs model %a\n", sh.name,
                                             picks[i].first, picks[i].second, got[i], want[i]);
                               }).mismatches;
    all_ok &= mismatches == 0;
    const double tflops = 2.0 * m * sh.n * static_cast<double>(sh.k) / (med * 1e-6) / 1e12;
    std::printf(
        "{\"bench\": \"fp8_gemm\", \"shape\": \"%s\", \"format\": \"%s\", \"kernel\": \"%s\", "
        "\"tokens\": %d, "
        "\"n\": %d, \"k\": %d, "
        "\"us\": %.1f, \"tflops\": %.1f, \"ratio_to_fp8_peak\": %.2f, \"sampled\": %d, "
        "\"model_mismatches\": %lld}\n",
        sh.name, sh.fp4 ? "fp4" : "fp8", tma ? "tma" : "first", m, sh.n, sh.k, med, tflops,
        kFp8PeakTflops / tflops, sample, static_cast<long long>(mismatches));
    std::fflush(stdout);
    for (void* ptr : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(dxs),
                      static_cast<void*>(dws)})
      PROBE_CUDA_CHECK(cudaFree(ptr));
  }
  return all_ok ? 0 : 1;
}
