// The FP8-instruction numerics mode's linears (fp8mma_linear.cuh says what they compute): the
// operands' e4m3 codes go into wgmma .e4m3 as stored (FP4's e2m1 codes turned into e4m3 in
// registers, shifted: BlockFragments), each short chain promoted into an fp32 sum (DeepGEMM's
// design), every chain a
// function of (n, k) alone, so a row's bits do not depend on the batch, the tile or the kernel.
//
// Three kernels, the same operations per element:
//   * MmaTmaKernel (dense FP8 from 128 rows, grouped input of whole 128-row groups too):
//     persistent and warp-specialized, as qgemm_ws_sm90.cu: a producer warp fills a ring of
//     stages (a 128-column block of 128 tokens' codes and of 128 weight rows, both TMA boxes in
//     the 128-byte swizzle, and the rows' and tokens' scales by bulk copies), two consumer
//     warpgroups (64 weight rows each) run the block's four m64n128k32 steps with both operands
//     from shared memory, promote, release the stage; a slice's sum joins the total in registers.
//     Tiles walk TileCoords' order.
//   * MmaWsExpertKernel (routed experts at many rows an expert; fp8mma_experts_sm90.cu): the same
//     ring, filled by a producer warpgroup's cp.async gathers of the slot's pair rows (TMA cannot
//     gather rows on Hopper); the weights' A fragments go from shared memory to registers (FP4:
//     converted there).
//   * MmaTileKernel (everything else: FP4 dense, routed experts at few rows, grouped input of
//     smaller groups, fewer than 128 rows): a block of two warpgroups owns 128 weight rows and 128
//     or, at decode sizes, 8 token rows gathered by cp.async (dense rows, or an expert slot's
//     pairs), a 4-stage pipeline of 128-column blocks, the tokens as B in the no-swizzle K-major
//     layout WgmmaDescB reads. Launches that would not fill the GPU split by k slice (grid z):
//     each block writes its slice's sum, MmaSliceSumKernel adds them in slice order.
// First measured as experiments (bench_fp8_gemm: the TMA form 636-817 TFLOP/s on flash-l8's dense
// FP8 shapes at 8,192 tokens on an H100, the gather form 259-277; docs/perf.md, sessions 39-40).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/fp8mma_tile.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tile_order.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"
#include "base/check.h"

namespace dsinfer::backend::cuda {

namespace {

using namespace fp8mma_tile;
using fp8mma::WgmmaFp8N128;
using fp8mma::WgmmaFp8N128Ss;

// ---- act_quant to e4m3 codes -------------------------------------------------------------------

// One warp per (row, 128-column block); lane l: columns 4l..4l+3 (qcore::QuantBlockCodes: the
// default linears' act_quant, the codes kept as e4m3 bytes). kSwiglu: the values quantized are
// SwigluF(x, u, limit) (SwigluKernel's, not stored), u beside x at the same ldx.
template <bool kSwiglu>
__global__ void __launch_bounds__(256)
    MmaActQuantKernel(const float* __restrict__ x, const float* __restrict__ u, int64_t ldx,
                      int64_t rows, int64_t width, float limit, uint8_t* __restrict__ q,
                      int64_t ldq, float* __restrict__ s_t, int64_t ld_t) {
  PdlTrigger();
  PdlWait();
  const int64_t nblk = (width + kBK - 1) / kBK;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (item >= rows * nblk) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = item / nblk, b = item % nblk, col = b * kBK + 4 * lane;
  // (Columns past width hold zeros, SwigluF(0, 0) too: their codes are 0.)
  float4 v = qcore::LoadX4(x + r * ldx + col, col < width);
  if constexpr (kSwiglu) {
    const float4 w = qcore::LoadX4(u + r * ldx + col, col < width);
    v = make_float4(SwigluF(v.x, w.x, limit), SwigluF(v.y, w.y, limit), SwigluF(v.z, w.z, limit),
                    SwigluF(v.w, w.w, limit));
  }
  float scale;
  *reinterpret_cast<uint32_t*>(q + r * ldq + col) = qcore::QuantBlockCodes(v, &scale);
  if (lane == 0) s_t[b * ld_t + r] = scale;
}

// MmaActQuantKernel<kSwiglu> over rows x width (u: kSwiglu's second input).
void LaunchActQuant(const float* x, const float* u, int64_t ldx, int64_t rows, int64_t width,
                    float limit, uint8_t* q, int64_t ldq, float* s_t, int64_t ld_t,
                    StreamHandle stream) {
  if (rows <= 0 || width <= 0) return;
  DSINFER_CHECK(ldq >= MmaQuantLd(width) && ldq % 16 == 0 && ld_t >= rows);
  const int64_t items = rows * ((width + kBK - 1) / kBK);
  const dim3 grid(static_cast<unsigned>((items + 7) / 8));
  if (u != nullptr) {
    LaunchKernel(MmaActQuantKernel<true>, grid, dim3(256), 0, stream, x, u, ldx, rows, width, limit,
                 q, ldq, s_t, ld_t);
  } else {
    LaunchKernel(MmaActQuantKernel<false>, grid, dim3(256), 0, stream, x, u, ldx, rows, width,
                 limit, q, ldq, s_t, ld_t);
  }
  CUDA_CHECK_LAUNCH();
}

// The wgmma step of a kN-token tile (A from registers, B through its no-swizzle descriptor).
template <int kN>
__device__ __forceinline__ void WgmmaStep(float (&d)[kN / 2], const uint32_t (&a)[4], uint32_t b,
                                          int scale_d) {
  if constexpr (kN == 8) {
    fp8mma::WgmmaFp8N8(d, a, WgmmaDescB<8>(b), scale_d);
  } else {
    static_assert(kN == 128, "token tiles of 8 or 128");
    WgmmaFp8N128(d, a, WgmmaDescB<128>(b), scale_d);
  }
}

template <int kN>
__host__ __device__ __forceinline__ int XStageOff(int i, int ch) {
  return (ch / 2) * (kN * 32) + (ch % 2) * (kN * 16) + i * 16;
}

// grid: (row blocks, token tiles | expert slots, slices (split) | token tile stride (experts)).
// kN: the token tile, 128 (many rows), or 8 (decode: small stages, several blocks an SM).
template <bool kFp4, bool kExpert, int kN>
__global__ void __launch_bounds__(kTileThreads, kN == 8 ? 3 : 1)
    MmaTileKernel(const __grid_constant__ TileArgs a) {
  using C = TileCfg<kFp4, kN>;
  constexpr int kF = kN / 2;  // accumulator floats of a thread
  extern __shared__ __align__(1024) uint8_t smem[];
  PdlTrigger();
  PdlWait();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rb = blockIdx.x, nblk = (a.k + kBK - 1) / kBK;
  const uint8_t* w = a.w;
  const uint8_t* sc = static_cast<const uint8_t*>(a.sc);
  int base = 0, count = a.m, tt0 = blockIdx.y, tt_step = gridDim.y, kb0 = 0, kb1 = nblk;
  if constexpr (kExpert) {
    const int slot = blockIdx.y;
    if (slot >= *a.num_active) return;
    const int e = a.active[slot];
    w = static_cast<const uint8_t*>(a.ew[e]);
    sc = static_cast<const uint8_t*>(a.es[e]);
    base = a.offsets[slot];
    count = a.offsets[slot + 1] - base;
    tt0 = blockIdx.z;
    tt_step = gridDim.z;
  } else if (a.part != nullptr) {  // one slice
    kb0 = blockIdx.z * kSliceBlocks;
    kb1 = min(nblk, kb0 + kSliceBlocks);
  }
  // The block's first column block of x (grouped input).
  const int xblk = a.xblk0 + (a.group_rows > 0 ? (rb * kBM / a.group_rows) * a.group_blks : 0);
  const uint8_t* const xq = a.xq + xblk * kBK;
  int* const src_row = reinterpret_cast<int*>(smem + C::kRowsOff);
  int* const out_row = src_row + kN;
  uint2* const tab = reinterpret_cast<uint2*>(smem + C::kTabOff);
  // (The table is read after the tile loop's first barrier.)
  if (kFp4 && threadIdx.x < 16) tab[threadIdx.x] = a.fp4_tab[threadIdx.x];
  float* const totals = reinterpret_cast<float*>(smem + C::kTotalsOff) + threadIdx.x;
  const int wbytes = kFp4 ? kBK / 2 : kBK;               // a row's bytes of a block
  const int r0 = (warp / 4) * 64 + (warp % 4) * 16 + g;  // the thread's rows r0, r0 + 8
  for (int tt = tt0; tt * kN < count; tt += tt_step) {
    if (threadIdx.x < kN) {
      const int i = tt * kN + threadIdx.x;
      int src = -1, out = -1;
      if (i < count) {
        if constexpr (kExpert) {
          out = a.pairs[base + i];
          src = out / a.x_row_div;
        } else {
          out = src = i;
        }
      }
      src_row[threadIdx.x] = src;
      out_row[threadIdx.x] = out;
    }
    __syncthreads();
    auto stage = [&](int s) { return smem + s * C::kStageBytes; };
    auto load = [&](int s, int kb) {
      uint8_t* st = stage(s);
      const int col0 = kb * kBK;
      for (int c = threadIdx.x; c < kN * 8; c += kTileThreads) {  // token i's chunk ch
        const int i = c / 8, ch = c % 8, src = src_row[i];
        const bool ok = src >= 0 && col0 + ch * 16 < a.k;
        CpAsync16(st + XStageOff<kN>(i, ch), ok ? xq + src * a.ldq + col0 + ch * 16 : xq, ok);
      }
      constexpr int kChunks = kFp4 ? 4 : 8;  // 16-byte chunks of a row's block
      for (int c = threadIdx.x; c < kBM * kChunks; c += kTileThreads) {
        const int r = c / kChunks, ch = c % kChunks, row = rb * kBM + r;
        const bool ok = row < a.n && col0 + ch * (kFp4 ? 32 : 16) < a.k;
        CpAsync16(st + C::kXBytes + r * C::kWPitch + ch * 16,
                  ok ? w + row * a.wpitch + kb * wbytes + ch * 16 : w, ok);
      }
      if (threadIdx.x < 32) {  // the rows' scales: 512 bytes
        CpAsync16(st + C::kScOff + threadIdx.x * 16,
                  sc + (static_cast<int64_t>(kb) * a.sc_ld + rb * kBM) * 4 + threadIdx.x * 16,
                  true);
      } else if (threadIdx.x >= 128 && threadIdx.x < 128 + kN) {  // the tokens' scales
        const int i = threadIdx.x - 128, src = src_row[i];
        const bool ok = src >= 0;
        CpAsync4(st + C::kSxOff + i * 4,
                 ok ? a.xs_t + static_cast<int64_t>(xblk + kb) * a.ld_t + src : a.xs_t, ok);
      }
    };
    float acc[kF];
#pragma unroll
    for (int i = 0; i < kF; ++i) acc[i] = 0.0f;
    for (int s = 0; s < kTileStages - 1; ++s) {
      if (kb0 + s < kb1) load(s, kb0 + s);
      CpAsyncCommit();
    }
    for (int kb = kb0; kb < kb1; ++kb) {
      const int u = kb - kb0;
      CpAsyncWait<kTileStages - 2>();  // this thread's copies of block kb have landed
      FenceProxyAsync();               // and are visible to wgmma's (async-proxy) reads
      __syncthreads();                 // every thread's; every warp done with the stage refilled
      if (kb + kTileStages - 1 < kb1)
        load((u + kTileStages - 1) % kTileStages, kb + kTileStages - 1);
      CpAsyncCommit();
      const uint8_t* st = stage(u % kTileStages);
      const uint8_t* wr = st + C::kXBytes;
      const float2* sx = reinterpret_cast<const float2*>(st + C::kSxOff);
      const uint32_t xa = SmemAddr(st);
      uint32_t af[4][4];  // step s's A fragment: rows r0 / r0 + 8, k 32 s + 4 t .. + 3 and + 16
      float s_lo, s_hi;   // the rows' scales of the block
      BlockFragments<kFp4>(wr, st + C::kScOff, tab, r0, t, af, &s_lo, &s_hi);
      float r[kF];
      WgmmaFence();
#pragma unroll
      for (int s = 0; s < 4; ++s) WgmmaStep<kN>(r, af[s], xa + s * kN * 32, s);
      WgmmaCommit();
      WgmmaWait<0>();
      WgmmaFenceOperand(r);
      Promote<kN>(r, sx, t, s_lo, s_hi, acc);
      if (SliceEnds(kb, nblk)) {  // a slice ends: into the total
        const bool first = a.part != nullptr || kb < kSliceBlocks;
#pragma unroll
        for (int i = 0; i < kF; ++i) {
          totals[i * kTileThreads] = first ? acc[i] : totals[i * kTileThreads] + acc[i];
          acc[i] = 0.0f;
        }
      }
    }
    CpAsyncWait<0>();
    // C fragment (n8 tile j, register e): row r0 + 8 (e / 2), token 8 j + 2 t + e % 2.
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int out = out_row[8 * j + 2 * t + e % 2], row = rb * kBM + r0 + 8 * (e / 2);
        if (out < 0 || row >= a.n) continue;
        const float v = totals[(4 * j + e) * kTileThreads];
        if (!kExpert && a.part != nullptr) {
          a.part[(static_cast<int64_t>(blockIdx.z) * a.m + out) * a.n + row] = v;
        } else {
          a.y[out * a.ldy + row] = v;
        }
      }
    }
    __syncthreads();  // the rows' tables and the stages are rewritten by the next tile
  }
}

// y[r, c] = the slices' sums of part, added in slice order.
__global__ void __launch_bounds__(256)
    MmaSliceSumKernel(const float* __restrict__ part, int slices, int64_t m, int64_t n,
                      float* __restrict__ y, int64_t ldy) {
  PdlTrigger();
  PdlWait();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m * n) return;
  float total = part[e];
  for (int s = 1; s < slices; ++s) total += part[s * m * n + e];
  y[(e / n) * ldy + e % n] = total;
}

// ---- the TMA tile (dense FP8) ------------------------------------------------------------------

constexpr int kTmaConsumers = 256, kTmaThreads = kTmaConsumers + 128, kTmaStages = 5;
constexpr int kTmaGroupRows = 8;
using TmaRegs = WsRegs<kTmaThreads, 40, 232>;

struct TmaArgs {
  CUtensorMap xmap,
      wmap;         // codes [m, k] and weights [n, k]: boxes 128 rows x 128 bytes, 128B swizzle
  const float* sc;  // WeightRef::mma's fp32 row scales, sc_ld rows apart
  int64_t sc_ld;
  const float* xs_t;  // [blocks][ld_t]
  int64_t ld_t;
  float* y;
  int64_t ldy;
  int m, n, k;
  int group_rows, group_blks;  // grouped input (TileArgs'), group_rows % 128 == 0, k % 128 == 0
};

struct TmaLay {
  static constexpr int kXBytes = kBN * kBK, kWBytes = kBM * kBK, kScBytes = kBM * 4,
                       kSxBytes = kBN * 4;
  static constexpr int kStageBytes = (kXBytes + kWBytes + kScBytes + kSxBytes + 1023) / 1024 * 1024;
  static constexpr int kSmem = kTmaStages * kStageBytes + 2 * kTmaStages * 8 + 1024;
};

__global__ void __launch_bounds__(kTmaThreads, 1) MmaTmaKernel(const __grid_constant__ TmaArgs a) {
  using L = TmaLay;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignSmem1024(smem_raw);
  auto x_at = [&](int s) { return smem + s * L::kStageBytes; };
  auto w_at = [&](int s) { return x_at(s) + L::kXBytes; };
  auto sc_at = [&](int s) { return w_at(s) + L::kWBytes; };
  auto sx_at = [&](int s) { return sc_at(s) + L::kScBytes; };
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kTmaStages * L::kStageBytes);
  uint64_t* empty = full + kTmaStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kTmaStages; ++s) {
      MbarInit(full + s, 1);
      MbarInit(empty + s, kTmaConsumers / 32);
    }
    FenceMbarInit();
  }
  __syncthreads();
  PdlTrigger();
  PdlWait();
  const int nblk = (a.k + kBK - 1) / kBK;
  const int64_t row_blocks = (a.n + kBM - 1) / kBM, token_tiles = (a.m + kBN - 1) / kBN;
  const int64_t ntiles = row_blocks * token_tiles;
  if (warp >= kTmaConsumers / 32) {  // the producer warpgroup; one lane of it works
    TmaRegs::Producer();
    if (warp != kTmaConsumers / 32 || lane != 0) return;
    uint32_t fills = 0;
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
      int64_t rb, tt;
      TileCoords(t, row_blocks, token_tiles, kTmaGroupRows, &rb, &tt);
      // The row block's first column block of x (grouped input).
      const int xblk =
          a.group_rows > 0 ? static_cast<int>(rb * kBM / a.group_rows) * a.group_blks : 0;
      for (int kb = 0; kb < nblk; ++kb, ++fills) {
        const int s = static_cast<int>(fills % kTmaStages);
        RingWaitEmpty<kTmaStages>(empty, fills);
        MbarArriveExpectTx(full + s, L::kXBytes + L::kWBytes + L::kScBytes + L::kSxBytes);
        TmaLoad2d(x_at(s), &a.xmap, (xblk + kb) * kBK, static_cast<int32_t>(tt * kBN), full + s);
        TmaLoad2d(w_at(s), &a.wmap, kb * kBK, static_cast<int32_t>(rb * kBM), full + s);
        BulkLoad(sc_at(s), a.sc + kb * a.sc_ld + rb * kBM, L::kScBytes, full + s);
        BulkLoad(sx_at(s), a.xs_t + (xblk + kb) * a.ld_t + tt * kBN, L::kSxBytes, full + s);
      }
    }
    return;
  }
  TmaRegs::Consumer();
  const int wg = warp / 4, g = lane / 4, t4 = lane % 4;
  const int r0 = wg * 64 + (warp % 4) * 16 + g;  // the thread's rows r0, r0 + 8 of the block
  uint32_t uses = 0;
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int64_t rb, tt;
    TileCoords(t, row_blocks, token_tiles, kTmaGroupRows, &rb, &tt);
    float acc[64], tot[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = tot[i] = 0.0f;
    for (int kb = 0; kb < nblk; ++kb, ++uses) {
      const int st = static_cast<int>(uses % kTmaStages);
      RingWaitFull<kTmaStages>(full, uses);
      const uint32_t xb = SmemAddr(x_at(st)), wb = SmemAddr(w_at(st)) + wg * 64 * kBK;
      float r[64];
      WgmmaFence();
#pragma unroll
      for (int q = 0; q < 4; ++q)
        WgmmaFp8N128Ss(r, WgmmaDescSw128(wb + q * 32), WgmmaDescSw128(xb + q * 32), q);
      WgmmaCommit();
      WgmmaWait<0>();
      WgmmaFenceOperand(r);
      const float* sw = reinterpret_cast<const float*>(sc_at(st));
      Promote<128>(r, reinterpret_cast<const float2*>(sx_at(st)), t4, sw[r0], sw[r0 + 8], acc);
      __syncwarp();
      if (lane == 0) MbarArrive(empty + st);  // the warp is done with the stage
      FoldSlice(kb, nblk, acc, tot);
    }
    // C fragment (n8 tile j, register e): row r0 + 8 (e / 2), token 8 j + 2 t4 + e % 2.
    const int64_t row = rb * kBM + r0;
    if ((tt + 1) * kBN <= a.m && (rb + 1) * kBM <= a.n) {
      // The whole tile in bounds (all but the edges): one base address, a token pair's two rows
      // 8 apart, the next n8 tile 8 tokens on (ncu, session 45: the general loop below took 17
      // instructions a value, a quarter of a k-1,024 launch's).
      float* y = a.y + (tt * kBN + 2 * t4) * a.ldy + row;
      const int64_t ldy = a.ldy;
#pragma unroll
      for (int j = 0; j < 16; ++j, y += 8 * ldy) {
        y[0] = tot[4 * j];
        y[8] = tot[4 * j + 2];
        y[ldy] = tot[4 * j + 1];
        y[ldy + 8] = tot[4 * j + 3];
      }
      continue;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t tok = tt * kBN + 8 * j + 2 * t4 + e % 2, rr = row + 8 * (e / 2);
        if (tok < a.m && rr < a.n) a.y[tok * a.ldy + rr] = tot[4 * j + e];
      }
    }
  }
}

std::atomic<int64_t> g_tma_launches{0}, g_tile_launches{0}, g_split_launches{0};

// The TMA tile for a dense FP8 launch (x_width: the columns of x, the group's k unless grouped);
// false (nothing launched) when the driver refuses a map.
bool TryLaunchTma(const TileArgs& t, int64_t x_width, StreamHandle stream) {
  TmaArgs a{};
  if (!EncodeTensorMap2d(&a.xmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, t.xq,
                         static_cast<uint64_t>(x_width), static_cast<uint64_t>(t.m),
                         static_cast<uint64_t>(t.ldq), kBK, kBN, CU_TENSOR_MAP_SWIZZLE_128B) ||
      !EncodeTensorMap2d(&a.wmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, t.w, static_cast<uint64_t>(t.k),
                         static_cast<uint64_t>(t.n), static_cast<uint64_t>(t.wpitch), kBK, kBM,
                         CU_TENSOR_MAP_SWIZZLE_128B))
    return false;
  a.sc = static_cast<const float*>(t.sc);
  a.sc_ld = t.sc_ld;
  a.xs_t = t.xs_t;
  a.ld_t = t.ld_t;
  a.y = t.y;
  a.ldy = t.ldy;
  a.m = t.m;
  a.n = t.n;
  a.k = t.k;
  a.group_rows = t.group_rows;
  a.group_blks = t.group_blks;
  const int64_t tiles = ((t.n + kBM - 1) / kBM) * ((t.m + kBN - 1) / kBN);
  LaunchCounted<MmaTmaKernel>(dim3(static_cast<unsigned>(std::min<int64_t>(tiles, SmCount()))),
                              kTmaThreads, TmaLay::kSmem, g_tma_launches, a, stream);
  return true;
}

template <bool kFp4, bool kExpert, int kN>
void LaunchTile(const TileArgs& a, dim3 grid, StreamHandle stream) {
  LaunchCounted<MmaTileKernel<kFp4, kExpert, kN>>(grid, kTileThreads, TileCfg<kFp4, kN>::kSmem,
                                                  g_tile_launches, a, stream);
}

template <bool kFp4, bool kExpert>
void LaunchTileN(const TileArgs& a, int tile, dim3 grid, StreamHandle stream) {
  tile == 8 ? LaunchTile<kFp4, kExpert, 8>(a, grid, stream)
            : LaunchTile<kFp4, kExpert, 128>(a, grid, stream);
}

// The gather tile of `tile` (8 or 128) tokens; grid.y: token tiles (dense) or expert slots.
void LaunchTileAny(const TileArgs& a, bool fp4, bool expert, int tile, dim3 grid,
                   StreamHandle stream) {
  if (fp4) {
    expert ? LaunchTileN<true, true>(a, tile, grid, stream)
           : LaunchTileN<true, false>(a, tile, grid, stream);
  } else {
    expert ? LaunchTileN<false, true>(a, tile, grid, stream)
           : LaunchTileN<false, false>(a, tile, grid, stream);
  }
}

// The token tile of a launch of about `rows` rows (per expert slot): 8 for decode sizes.
int TileFor(int64_t rows) { return rows <= 32 ? 8 : 128; }

// TileArgs::fp4_tab: the shifts' tables (fp8mma::E2m1ShiftTable).
struct Fp4Table {
  uint2 tab[16];
  Fp4Table() {
    for (int d = 0; d < 16; ++d) tab[d] = fp8mma::E2m1ShiftTable(d);
  }
};

// What every launch of the mode checks: the weights' layout and shape, the input quantized into
// the scratch, or taken as xq gives it in the mode's form (set in *t, and returned: the codes the
// launch reads).
QuantizedRows Prepare(const WeightRef& w, const float* x, int64_t ldx, int64_t x_rows,
                      int64_t width, const ActQuantScratch& aq, const QuantizedRows& xq,
                      TileArgs* t, StreamHandle stream) {
  DSINFER_CHECK_MSG(w.mma && IsQuantized(w.format),
                    "the FP8-instruction linear takes FP8 / FP4 weights in its layout");
  DSINFER_CHECK_MSG(w.k % 32 == 0 && w.k > 0 && w.n > 0 && w.n < (int64_t{1} << 30) &&
                        (w.format == WeightFormat::kFp4 || w.block == 128),
                    "FP8-instruction linear: k a multiple of 32, FP8 blocks of 128");
  const bool given = xq.c != nullptr;
  DSINFER_CHECK_MSG(given || ((reinterpret_cast<uintptr_t>(x) & 15) == 0 && ldx % 4 == 0),
                    "FP8-instruction linear: activations must be 16-byte aligned");
  const int64_t ldq = given ? xq.ldc : MmaQuantLd(width),
                ld_t = given ? xq.ldcs : MmaScaleLd(x_rows);
  DSINFER_CHECK_MSG(!given || (xq.cs != nullptr && ldq >= MmaQuantLd(width) && ldq % 16 == 0 &&
                               ld_t >= x_rows && (reinterpret_cast<uintptr_t>(xq.c) & 15) == 0),
                    "FP8-instruction linear: quantized rows given in another layout");
  DSINFER_CHECK_MSG(aq.q != nullptr && MmaQuantBytes(x_rows, width) <= aq.q_bytes &&
                        MmaScaleCount(x_rows, width) <= aq.s_count &&
                        x_rows * ldq < (int64_t{1} << 31),
                    "FP8-instruction linear: the act_quant scratch is too small for the input");
  if (!given) LaunchMmaActQuant(x, ldx, x_rows, width, aq.q, ldq, aq.s, ld_t, stream);
  const bool fp4 = w.format == WeightFormat::kFp4;
  t->wpitch = fp4 ? w.k / 2 : w.k;
  t->sc_ld = MmaScaleLd(w.n);
  t->n = static_cast<int>(w.n);
  t->k = static_cast<int>(w.k);
  t->xq = given ? xq.c : aq.q;
  t->ldq = ldq;
  t->xs_t = given ? xq.cs : aq.s;
  t->ld_t = ld_t;
  static const Fp4Table kFp4Tab;
  std::memcpy(t->fp4_tab, kFp4Tab.tab, sizeof(t->fp4_tab));
  QuantizedRows used;
  used.c = t->xq;
  used.ldc = ldq;
  used.cs = t->xs_t;
  used.ldcs = ld_t;
  return used;
}

}  // namespace

void LaunchMmaActQuant(const float* x, int64_t ldx, int64_t rows, int64_t width, uint8_t* q,
                       int64_t ldq, float* s_t, int64_t ld_t, StreamHandle stream) {
  LaunchActQuant(x, nullptr, ldx, rows, width, 0.0f, q, ldq, s_t, ld_t, stream);
}

namespace {

// A dense launch (x's codes: p.xq's, else made into aq); returns the codes it read.
QuantizedRows MmaLinear(const LinearParams& p, StreamHandle stream) {
  const WeightRef& w = p.w;
  const bool fp4 = w.format == WeightFormat::kFp4, grouped = p.x_group_rows > 0;
  const int64_t width = grouped ? ((w.n - 1) / p.x_group_rows) * p.x_group_stride + w.k : w.k;
  DSINFER_CHECK_MSG(!grouped || (p.x_group_stride % kBK == 0 && p.x_group_rows % 4 == 0),
                    "FP8-instruction linear: grouped input at 128-column group offsets, groups of "
                    "4n rows");
  DSINFER_CHECK_MSG(p.m < (int64_t{1} << 30), "FP8-instruction linear: too many rows");
  TileArgs t{};
  const QuantizedRows used = Prepare(w, p.x, p.ldx, p.m, width, p.aq, p.xq, &t, stream);
  t.m = static_cast<int>(p.m);
  t.y = p.y;
  t.ldy = p.ldy;
  t.w = static_cast<const uint8_t*>(w.data);
  t.sc = w.scale;
  const int tile = TileFor(p.m);
  const int64_t token_tiles = (p.m + tile - 1) / tile;
  if (grouped && p.x_group_rows % kBM != 0) {
    // Groups that split a 128-row block (small test models): a launch per group, its rows, its
    // columns of x and of y.
    const int64_t groups = (w.n + p.x_group_rows - 1) / p.x_group_rows;
    for (int64_t gi = 0; gi < groups; ++gi) {
      TileArgs tg = t;
      const int64_t row0 = gi * p.x_group_rows;
      tg.n = static_cast<int>(std::min<int64_t>(p.x_group_rows, w.n - row0));
      tg.w = t.w + row0 * t.wpitch;
      // (The scales of rows row0..: the kernels read them at (kb * sc_ld + row) from the pointer,
      // the group's rows counted from 0; a row block's read past the group stays within
      // MmaScaleBytes.)
      tg.sc = static_cast<const uint8_t*>(w.scale) + row0 * 4;
      tg.xblk0 = static_cast<int>(gi * p.x_group_stride / kBK);
      tg.y = p.y + row0;
      LaunchTileAny(tg, fp4, false, tile,
                    dim3(static_cast<unsigned>((tg.n + kBM - 1) / kBM),
                         static_cast<unsigned>(token_tiles), 1),
                    stream);
    }
    return used;
  }
  if (grouped) {  // one launch: each 128-row block reads its group's columns
    t.group_rows = static_cast<int>(p.x_group_rows);
    t.group_blks = static_cast<int>(p.x_group_stride / kBK);
  }
  const int64_t row_blocks = (w.n + kBM - 1) / kBM, blocks = row_blocks * token_tiles;
  // (Grouped: whole 128-column blocks of a group, so that no box reads the next group's.)
  if (!fp4 && p.m >= kBN && w.n >= kBM && w.k >= kBK &&
      (reinterpret_cast<uintptr_t>(w.data) & 15) == 0 && w.k % (grouped ? kBK : 16) == 0 &&
      TryLaunchTma(t, width, stream))
    return used;
  // Fewer blocks than SMs: a block per k slice too, their sums added after (the same order).
  const int slices = static_cast<int>((w.k + SliceCols(false) - 1) / SliceCols(false));
  if (slices > 1 && blocks < SmCount() && p.aq.part != nullptr &&
      slices * p.m * w.n <= p.aq.part_count) {
    t.part = p.aq.part;
    LaunchTileAny(t, fp4, false, tile,
                  dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(token_tiles),
                       static_cast<unsigned>(slices)),
                  stream);
    const int64_t mn = p.m * w.n;
    LaunchKernel(MmaSliceSumKernel, dim3(static_cast<unsigned>((mn + 255) / 256)), dim3(256), 0,
                 stream, static_cast<const float*>(p.aq.part), slices, p.m, w.n, p.y, p.ldy);
    CUDA_CHECK_LAUNCH();
    ++g_split_launches;
    return used;
  }
  LaunchTileAny(t, fp4, false, tile,
                dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(token_tiles), 1),
                stream);
  return used;
}

}  // namespace

void LaunchMmaLinear(const LinearParams& p, StreamHandle stream) {
  if (p.m <= 0 || p.w.n <= 0) return;
  MmaLinear(p, stream);
}

namespace {

// The routed experts' launch (x's codes: p.xq's, else made into aq); returns the codes it read.
// `gather` false: where the TMA-fed tile runs, aq holds its gathered rows already (the launch
// before was over the same codes and pairs).
QuantizedRows MmaExpertLinear(const ExpertLinearParams& p, bool gather, StreamHandle stream) {
  const WeightRef& w = p.shape;
  const bool fp4 = w.format == WeightFormat::kFp4;
  const int64_t x_rows = (p.total_pairs + p.x_row_div - 1) / p.x_row_div;
  TileArgs t{};
  const QuantizedRows used = Prepare(w, p.x, p.ldx, x_rows, w.k, p.aq, p.xq, &t, stream);
  t.ew = p.data;
  t.es = p.scale;
  t.y = p.y;
  t.ldy = p.ldy;
  t.active = p.active;
  t.num_active = p.num_active;
  t.offsets = p.offsets;
  t.pairs = p.pairs;
  t.x_row_div = p.x_row_div;
  const int64_t per_slot = ExpertPairsPerSlot(p.total_pairs, p.max_slots);
  const int tile = TileFor(per_slot);
  const unsigned z = ExpertTileStride(per_slot, tile);
  if (tile == kBN && GetKernelOptions().fp8mma_ws_experts) {  // the warp-specialized gather tile
    const dim3 grid(static_cast<unsigned>((w.n + kBM - 1) / kBM),
                    static_cast<unsigned>(p.max_slots), z);
    if (GetKernelOptions().fp8mma_tma_experts &&
        TryLaunchMmaWsTmaExperts(t, fp4, p.aq, x_rows, p.total_pairs, p.max_slots, grid, gather,
                                 stream))
      return used;
    LaunchMmaWsExperts(t, fp4, grid, stream);
    return used;
  }
  LaunchTileAny(
      t, fp4, true, tile,
      dim3(static_cast<unsigned>((w.n + kBM - 1) / kBM), static_cast<unsigned>(p.max_slots), z),
      stream);
  return used;
}

}  // namespace

namespace {

// The SwiGLU of g and u ([rows, ld], width columns) into g, or with `to_aq` its act_quant codes
// into aq where the next linear's Prepare would put them (x_rows = rows), returned.
QuantizedRows Swiglu(float* g, const float* u, int64_t ld, int64_t rows, int64_t width, float limit,
                     bool to_aq, const ActQuantScratch& aq, StreamHandle stream) {
  if (!to_aq) {
    LaunchSwiglu(g, u, rows, width, ld, limit, stream);
    return {};
  }
  DSINFER_CHECK_MSG(ld % 4 == 0 && (reinterpret_cast<uintptr_t>(g) & 15) == 0 &&
                        (reinterpret_cast<uintptr_t>(u) & 15) == 0 &&
                        MmaQuantBytes(rows, width) <= aq.q_bytes &&
                        MmaScaleCount(rows, width) <= aq.s_count,
                    "FP8-instruction linear: SwiGLU codes need aligned rows and the scratch");
  const QuantizedRows r = MmaCodes(aq.q, aq.s, rows, width);
  LaunchActQuant(g, u, ld, rows, width, limit, aq.q, r.ldc, aq.s, r.ldcs, stream);
  return r;
}

}  // namespace

QuantizedRows LaunchMmaActQuantRows(const float* x, int64_t ldx, int64_t rows, int64_t k,
                                    uint8_t* c_buf, float* cs_buf, StreamHandle stream) {
  DSINFER_CHECK_MSG((reinterpret_cast<uintptr_t>(x) & 15) == 0 && ldx % 4 == 0 &&
                        (reinterpret_cast<uintptr_t>(c_buf) & 15) == 0,
                    "FP8-instruction act_quant: rows must be 16-byte aligned");
  const QuantizedRows r = MmaCodes(c_buf, cs_buf, rows, k);
  LaunchMmaActQuant(x, ldx, rows, k, c_buf, r.ldc, cs_buf, r.ldcs, stream);
  return r;
}

void LaunchMmaExpertLinear(const ExpertLinearParams& p, StreamHandle stream) {
  if (p.max_slots <= 0 || p.total_pairs <= 0) return;
  MmaExpertLinear(p, true, stream);
}

QuantizedRows LaunchMmaExpertLinearSwiglu(const ExpertLinearParams& p1, const void* const* w3_data,
                                          const void* const* w3_scale, float* u, float limit,
                                          StreamHandle stream) {
  if (p1.max_slots <= 0 || p1.total_pairs <= 0) return {};
  ExpertLinearParams p3 = p1;
  p3.xq = MmaExpertLinear(p1, true, stream);  // W3 on W1's codes (and gathered rows)
  p3.data = w3_data;
  p3.scale = w3_scale;
  p3.y = u;
  MmaExpertLinear(p3, false, stream);
  return Swiglu(p1.y, u, p1.ldy, p1.total_pairs, p1.shape.n, limit, p1.swiglu_to_aq, p1.aq, stream);
}

QuantizedRows LaunchMmaLinearSwiglu(const LinearParams& p1, const WeightRef& w3, float* u,
                                    float limit, StreamHandle stream) {
  if (p1.m <= 0 || p1.w.n <= 0) return {};
  LinearParams p3 = p1;
  p3.xq = MmaLinear(p1, stream);  // W3 on W1's codes
  p3.w = w3;
  p3.y = u;
  MmaLinear(p3, stream);
  return Swiglu(p1.y, u, p1.ldy, p1.m, p1.w.n, limit, p1.swiglu_to_aq, p1.aq, stream);
}

int64_t MmaTmaLaunches() { return g_tma_launches.load(); }
int64_t MmaTileLaunches() { return g_tile_launches.load(); }
int64_t MmaSplitLaunches() { return g_split_launches.load(); }

void PackMmaScalesFp8(const float* per_row, int64_t n, int64_t k, float* dst) {
  const int64_t nb = (k + 127) / 128, ld = MmaScaleLd(n);
  std::memset(dst, 0, static_cast<size_t>(MmaScaleBytes(n, k)));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < nb; ++b) dst[b * ld + r] = per_row[r * nb + b];
}

void PackMmaScalesFp4(const uint8_t* groups, int64_t n, int64_t k, uint8_t* dst) {
  const int64_t ld = MmaScaleLd(n), ng = k / 32;
  std::memset(dst, 0, static_cast<size_t>(MmaScaleBytes(n, k)));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t gi = 0; gi < ng; ++gi) dst[((gi / 4) * ld + r) * 4 + gi % 4] = groups[r * ng + gi];
}

}  // namespace dsinfer::backend::cuda
