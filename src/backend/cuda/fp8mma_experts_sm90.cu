// The FP8-instruction mode's warp-specialized gather tile for routed experts at many rows an
// expert (fp8mma_linear.cuh says what the mode computes; fp8mma_linear_sm90.cu's
// LaunchMmaExpertLinear chooses it).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/fp8mma_tile.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"

namespace dsinfer::backend::cuda {
namespace fp8mma_tile {
namespace {

// ---- the warp-specialized gather tile (routed experts, many rows) ----------------------------

// MmaTileKernel's stages and operations (kN = 128, or 192: the wide tile) with a producer
// warpgroup instead of every
// thread copying: its 128 threads gather the slot's token rows, the weight rows and the scales by
// cp.async into a ring of stages, each thread's copies arriving on the stage's barrier when they
// land; two consumer warpgroups wait for a stage, compute and release it, so loads never wait for
// the compute nor the compute for a block-wide barrier. Totals in registers, except for the wide
// tile's (kTok 192, FP4 and the TMA-fed tokens only: shared memory). grid: (row blocks, expert
// slots, token tile stride). The default (KernelOptions::fp8mma_ws_experts; off: the gather
// tile): 11.7% faster on flash-l8's prefill experts (docs/perf.md, session 40).
constexpr int kWsConsumers = 256, kWsThreads = kWsConsumers + 128, kWsStages = 5;
// The producer's address maths and the consumers' totals need 56 / 224 registers; the wide tile's
// consumers (kTok 192: an accumulator and a slice sum of 96 floats each) 232, its producer 40.
using WsExpertRegs = WsRegs<kWsThreads, 56, 224>;
using WsWideRegs = WsRegs<kWsThreads, 40, 232>;
// The wide tile's tokens (KernelOptions::fp8mma_wide_experts): the gathered rows' slack.
constexpr int kWsWide = kMmaExpertTileMaxRows;

// A stage of kTok tokens: TileCfg<kFp4, kTok>'s, except that the tokens' codes are a kTok x
// 128-byte tile in the 128-byte swizzle (token i's 16-byte chunk c at i * 128 + ((c ^ i % 8) *
// 16), as a TMA box would write it: wgmma reads it through WgmmaDescSw128), so stages start
// 1024-byte aligned. The wide tile (kTok 192) keeps each consumer thread's running total in shared
// memory (kTok / 2 floats as float4s, kWsConsumers apart), after the source rows, and so has room
// for 3 stages only.
template <bool kFp4, int kTok>
struct WsCfg {
  using T = TileCfg<kFp4, kTok>;
  static constexpr bool kWide = kTok > kBN;
  static constexpr int kStages = kWide ? 3 : kWsStages;
  static constexpr int kStageBytes = (T::kStageBytes + 1023) / 1024 * 1024;
  static constexpr int kTabOff = kStages * kStageBytes + 128;  // after the ring's barriers
  static constexpr int kSrcOff = kTabOff + 16 * 8;  // the token tile's source rows (producer)
  static constexpr int kTotOff = kSrcOff + kTok * 4;
  static constexpr int kSmem = kTotOff + (kWide ? kWsConsumers * kTok / 2 * 4 : 0) + 1024;
  static_assert(2 * kStages * 8 <= 128, "the barriers fit before the table");
  static_assert(kSmem <= 227 * 1024, "an SM's shared memory");
};

// The token rows a tile of at most kTok computes for `left` rows of its slot from its first: kTok,
// or the last tile's rows rounded up to 32 (wgmma's N; an element's bits do not depend on N).
template <int kTok>
__host__ __device__ __forceinline__ int WsTileRows(int left) {
  return left >= kTok ? kTok : (left + 31) / 32 * 32;
}

// What the consumers of a token tile share (MmaWsExpertKernel).
struct WsTile {
  const TileArgs& a;
  uint8_t* smem;  // the ring's stages (1024-byte aligned)
  uint64_t* full;
  uint64_t* empty;
  int rb;     // the row block
  int first;  // the tile's first pair (an index into a.pairs)
  int left;   // the slot's pairs from it on (the tile's: min(left, kTok))
  int nblk;   // 128-column blocks of k
  int r0;     // the thread's rows r0, r0 + 8 of the block
  int lane;
  const uint2* tab;  // FP4: TileArgs::fp4_tab in shared memory
  float4* tot;       // the wide tile: the thread's running total (its first float4)
};

// A thread's outputs of a token tile from its totals of kF values: C fragment (n8 tile j, register
// e): row r0 + 8 (e / 2), token 8 j + 2 t + e % 2.
template <int kF>
__device__ __forceinline__ void WsStore(const WsTile& c, const float (&tot)[kF]) {
  const TileArgs& a = c.a;
  const int t = c.lane % 4;
#pragma unroll
  for (int j = 0; j < kF / 4; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 8 * j + 2 * t + e % 2, row = c.rb * kBM + c.r0 + 8 * (e / 2);
      if (i < c.left && row < a.n) a.y[a.pairs[c.first + i] * a.ldy + row] = tot[4 * j + e];
    }
  }
}

// FoldSlice with the running total in shared memory (tot: the thread's first float4, kWsConsumers
// apart), touched at a slice's end only; the last slice's total is left in acc. The same
// operations as FoldSlice's, so the same bits.
template <int kF>
__device__ __forceinline__ void FoldSliceShared(int kb, int nblk, float (&acc)[kF], float4* tot) {
  if (!SliceEnds(kb, nblk)) return;
  const bool first = kb < kSliceBlocks, last = kb + 1 == nblk;
  if (first && last) return;  // one slice: acc is the total
#pragma unroll
  for (int q = 0; q < kF / 4; ++q) {
    float* const v = acc + 4 * q;
    float4* const p = tot + q * kWsConsumers;
    if (first) {
      *p = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      const float4 o = *p;
      const float4 sum = make_float4(o.x + v[0], o.y + v[1], o.z + v[2], o.w + v[3]);
      if (last) {
        v[0] = sum.x, v[1] = sum.y, v[2] = sum.z, v[3] = sum.w;
        continue;
      }
      *p = sum;
    }
    v[0] = v[1] = v[2] = v[3] = 0.0f;
  }
}

// A consumer thread's share of a token tile of kN rows (WsTileRows) in a ring of kTok-token
// stages: the ring's stages of k in order, each block's wgmma steps promoted into the slice's sum,
// the slices folded into the total, the tile's outputs written.
template <bool kFp4, int kN, int kTok>
__device__ __forceinline__ void WsConsume(const WsTile& c, uint32_t* uses) {
  using Cfg = WsCfg<kFp4, kTok>;
  using C = typename Cfg::T;
  constexpr int kF = kN / 2, kStages = Cfg::kStages;
  const int t = c.lane % 4, r0 = c.r0;
  float acc[kF], tot[Cfg::kWide ? 1 : kF];
#pragma unroll
  for (int i = 0; i < kF; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < (Cfg::kWide ? 1 : kF); ++i) tot[i] = 0.0f;
  for (int kb = 0; kb < c.nblk; ++kb, ++*uses) {
    const int s = static_cast<int>(*uses % kStages);
    RingWaitFull<kStages>(c.full, *uses);
    FenceProxyAsync();  // the stage's copies, seen by wgmma's reads
    const uint8_t* st = c.smem + s * Cfg::kStageBytes;
    const uint8_t* wr = st + C::kXBytes;
    const float2* sx = reinterpret_cast<const float2*>(st + C::kSxOff);
    const uint32_t xa = SmemAddr(st);
    uint32_t af[4][4];
    float s_lo, s_hi;
    BlockFragments<kFp4>(wr, st + C::kScOff, c.tab, r0, t, af, &s_lo, &s_hi);
    float r[kF];
    WgmmaFence();
#pragma unroll
    for (int q = 0; q < 4; ++q) fp8mma::WgmmaFp8Rs<kN>(r, af[q], WgmmaDescSw128(xa + q * 32), q);
    WgmmaCommit();
    WgmmaWait<0>();
    WgmmaFenceOperand(r);
    Promote<kN>(r, sx, t, s_lo, s_hi, acc);
    __syncwarp();
    if (c.lane == 0) MbarArrive(c.empty + s);  // the warp is done with the stage
    if constexpr (Cfg::kWide)
      FoldSliceShared(kb, c.nblk, acc, c.tot);
    else
      FoldSlice(kb, c.nblk, acc, tot);
  }
  if constexpr (Cfg::kWide)
    WsStore(c, acc);  // (the total, from the last slice's fold)
  else
    WsStore(c, tot);
}

// The gathered rows' first row of an expert slot (its pairs' rows follow in list order): a
// multiple of 4, so that a token tile's scales start 16-byte aligned, and past the slot before's.
__host__ __device__ __forceinline__ int64_t GatheredRow(int base, int slot) {
  return (static_cast<int64_t>(base) + 3) / 4 * 4 + 4 * static_cast<int64_t>(slot);
}

// The kernel's arguments: the tile's, and for the TMA form (kTma) the act_quant codes and scales
// gathered into list order (MmaGatherPairsKernel): the codes through a tensor map (boxes of kTok
// rows x 128 bytes, 128-byte swizzle), the scales [blocks][ldg].
struct WsArgs {
  CUtensorMap xmap;
  TileArgs t;
  const float* xsg_t;
  int64_t ldg;
};

// Copies each listed pair's act_quant codes (x row pairs[i] / div) and scales into the gathered
// rows: a warp per pair; grid (x, expert slots).
struct GatherArgs {
  const uint8_t* xq;
  int64_t ldq;
  const float* xs_t;
  int64_t ld_t;
  int nblk;
  const int32_t* num_active;
  const int32_t* offsets;
  const int32_t* pairs;
  int div;
  uint8_t* xg;
  float* xsg_t;
  int64_t ldg;
};

__global__ void __launch_bounds__(256) MmaGatherPairsKernel(const __grid_constant__ GatherArgs g) {
  PdlTrigger();
  PdlWait();
  const int slot = blockIdx.y;
  if (slot >= *g.num_active) return;
  const int base = g.offsets[slot], count = g.offsets[slot + 1] - base;
  const int64_t row0 = GatheredRow(base, slot);
  const int lane = threadIdx.x % 32;
  for (int j = blockIdx.x * 8 + threadIdx.x / 32; j < count; j += gridDim.x * 8) {
    const int64_t src = g.pairs[base + j] / g.div, dst = row0 + j;
    const uint4* const from = reinterpret_cast<const uint4*>(g.xq + src * g.ldq);
    uint4* const to = reinterpret_cast<uint4*>(g.xg + dst * g.ldq);
    for (int64_t c = lane; c < g.ldq / 16; c += 32) to[c] = from[c];
    for (int kb = lane; kb < g.nblk; kb += 32)
      g.xsg_t[kb * g.ldg + dst] = g.xs_t[kb * g.ld_t + src];
  }
}

template <bool kFp4, bool kTma, int kTok>
__global__ void __launch_bounds__(kWsThreads, 1)
    MmaWsExpertKernel(const __grid_constant__ WsArgs A) {
  const TileArgs& a = A.t;
  static_assert(kTok == kBN || kTma, "the wide tile's tokens come by the TMA");
  using Cfg = WsCfg<kFp4, kTok>;
  using C = typename Cfg::T;
  using Regs = std::conditional_t<Cfg::kWide, WsWideRegs, WsExpertRegs>;
  constexpr int kStageBytes = Cfg::kStageBytes, kStages = Cfg::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignSmem1024(smem_raw);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* const empty = full + kStages;
  uint2* const tab = reinterpret_cast<uint2*>(smem + Cfg::kTabOff);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // The producer threads' cp.async arrivals (kTma: and thread 0's for the tokens' box).
      MbarInit(full + s, kTma ? 129 : 128);
      MbarInit(empty + s, kWsConsumers / 32);  // the consumer warps' releases
    }
    FenceMbarInit();
  }
  if (kFp4 && threadIdx.x < 16) tab[threadIdx.x] = a.fp4_tab[threadIdx.x];
  __syncthreads();
  PdlTrigger();
  PdlWait();
  const int rb = blockIdx.x, slot = blockIdx.y, nblk = (a.k + kBK - 1) / kBK;
  if (slot >= *a.num_active) return;
  const int e = a.active[slot];
  const uint8_t* const w = static_cast<const uint8_t*>(a.ew[e]);
  const uint8_t* const sc = static_cast<const uint8_t*>(a.es[e]);
  const int base = a.offsets[slot], count = a.offsets[slot + 1] - base;
  auto stage = [&](int s) { return smem + s * kStageBytes; };
  if (warp >= kWsConsumers / 32) {  // the producer warpgroup: its 128 threads share the copies
    Regs::Producer();
    const int pt = threadIdx.x - kWsConsumers;  // 0..127
    // The tokens' codes: chunk xc of tokens xt + 16 i (i < 8), so that 8 neighbouring threads copy
    // one token's 128 bytes; all of them land at the same swizzled chunk of their rows.
    const int xc = pt % 8, xt = pt / 8;
    const int xdst = xt * 128 + ((xc ^ (xt % 8)) << 4);
    // The weights: chunk wc of rows wr + kWStep j (FP8: 8 chunks a row, FP4: 4), the row block's
    // rows, the same for every tile of the slot.
    constexpr int kChunks = kFp4 ? 4 : 8;  // 16-byte chunks of a row's block
    constexpr int kWStep = 128 / kChunks;
    const int wc = pt % kChunks, wr = pt / kChunks;
    const int wbytes = kFp4 ? kBK / 2 : kBK;
    const uint8_t* const wrow = w + static_cast<int64_t>(rb * kBM + wr) * a.wpitch + wc * 16;
    const int64_t wstep = kWStep * a.wpitch;
    const int nrows = a.n - rb * kBM - wr;  // this thread's rows j with kWStep j < nrows exist
    int* const tok_src = reinterpret_cast<int*>(smem + Cfg::kSrcOff);
    uint32_t fills = 0;
    [[maybe_unused]] const int64_t grow = kTma ? GatheredRow(base, slot) : 0;
    for (int tt = blockIdx.z; tt * kTok < count; tt += gridDim.z) {
      // The tile's source x rows: >= 0 a row, -1 none (zeros: the tile computes the row, the
      // slot has no pair there), -2 the tile does not compute the row (no copy).
      const int rows = WsTileRows<kTok>(count - tt * kTok), i_tok = tt * kTok + pt;
      // (kTma: the tile's rows come gathered; no source rows.)
      const int ssrc = kTma || pt >= rows ? -2
                       : i_tok < count    ? a.pairs[base + i_tok] / a.x_row_div
                                          : -1;
      if constexpr (!kTma) {
        NamedBarrier<1, 128>();  // the last tile's rows read
        tok_src[pt] = ssrc;
        NamedBarrier<1, 128>();
      }
      for (int kb = 0; kb < nblk; ++kb, ++fills) {
        const int s = static_cast<int>(fills % kStages);
        RingWaitEmpty<kStages>(empty, fills);
        uint8_t* st = stage(s);
        const int col0 = kb * kBK;
        if constexpr (kTma) {  // the tile's gathered rows: one box and one bulk copy of scales
          if (pt == 0) {
            const int64_t row = grow + tt * kTok;
            MbarArriveExpectTx(full + s, kTok * kBK + kTok * 4);
            TmaLoad2d(st, &A.xmap, col0, static_cast<int32_t>(row), full + s);
            BulkLoad(st + C::kSxOff, A.xsg_t + kb * A.ldg + row, kTok * 4, full + s);
          }
        } else {
          const bool xk = col0 + xc * 16 < a.k;
          const uint8_t* const xcol = a.xq + col0 + xc * 16;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int src = tok_src[xt + 16 * i];
            if (src < -1) continue;
            const bool ok = src >= 0 && xk;
            CpAsync16(st + xdst + i * 16 * 128,
                      ok ? xcol + static_cast<int64_t>(src) * a.ldq : a.xq, ok);
          }
          if (ssrc >= -1)
            CpAsync4(st + C::kSxOff + pt * 4,
                     ssrc >= 0 ? a.xs_t + static_cast<int64_t>(kb) * a.ld_t + ssrc : a.xs_t,
                     ssrc >= 0);
        }
        const bool wk = col0 + wc * (kFp4 ? 32 : 16) < a.k;
        const uint8_t* const wcol = wrow + kb * wbytes;
#pragma unroll
        for (int j = 0; j < kChunks; ++j) {
          const bool ok = kWStep * j < nrows && wk;
          CpAsync16(st + C::kXBytes + (wr + kWStep * j) * C::kWPitch + wc * 16,
                    ok ? wcol + j * wstep : w, ok);
        }
        if (pt < 32)
          CpAsync16(st + C::kScOff + pt * 16,
                    sc + (static_cast<int64_t>(kb) * a.sc_ld + rb * kBM) * 4 + pt * 16, true);
        CpAsyncMbarArrive(full + s);
      }
    }
    return;
  }
  Regs::Consumer();
  const int r0 = (warp / 4) * 64 + (warp % 4) * 16 + lane / 4;  // the thread's rows r0, r0 + 8
  uint32_t uses = 0;
  float4* const tot = reinterpret_cast<float4*>(smem + Cfg::kTotOff) + threadIdx.x;
  for (int tt = blockIdx.z; tt * kTok < count; tt += gridDim.z) {
    const int left = count - tt * kTok;
    const WsTile tile{a, smem, full, empty, rb, base + tt * kTok, left, nblk, r0, lane, tab, tot};
    auto consume = [&](auto n_c) { WsConsume<kFp4, decltype(n_c)::value, kTok>(tile, &uses); };
    switch (WsTileRows<kTok>(left)) {
      case 32:
        consume(std::integral_constant<int, 32>{});
        break;
      case 64:
        consume(std::integral_constant<int, 64>{});
        break;
      case 96:
        consume(std::integral_constant<int, 96>{});
        break;
      case 128:
        consume(std::integral_constant<int, 128>{});
        break;
      default:  // the wide tile's 160 and 192
        if constexpr (Cfg::kWide) {
          if (WsTileRows<kTok>(left) == 160) {
            consume(std::integral_constant<int, 160>{});
            break;
          }
        }
        consume(std::integral_constant<int, kTok>{});
        break;
    }
  }
}

std::atomic<int64_t> g_ws_launches{0}, g_ws_tma_launches{0}, g_ws_wide_launches{0};

// (The wide tile is FP4's only: FP8's weight rows leave no room for its stages.)
template <bool kTma, int kTok>
void LaunchWs(const WsArgs& a, bool fp4, dim3 grid, StreamHandle stream) {
  auto& count = kTma ? g_ws_tma_launches : g_ws_launches;
  if constexpr (kTok > kBN) {
    DSINFER_CHECK(fp4);
    ++g_ws_wide_launches;
    LaunchCounted<MmaWsExpertKernel<true, kTma, kTok>>(grid, kWsThreads, WsCfg<true, kTok>::kSmem,
                                                       count, a, stream);
  } else {
    fp4 ? LaunchCounted<MmaWsExpertKernel<true, kTma, kTok>>(
              grid, kWsThreads, WsCfg<true, kTok>::kSmem, count, a, stream)
        : LaunchCounted<MmaWsExpertKernel<false, kTma, kTok>>(
              grid, kWsThreads, WsCfg<false, kTok>::kSmem, count, a, stream);
  }
}

}  // namespace

void LaunchMmaWsExperts(const TileArgs& t, bool fp4, dim3 grid, StreamHandle stream) {
  WsArgs a{};
  a.t = t;
  LaunchWs<false, kBN>(a, fp4, grid, stream);
}

bool TryLaunchMmaWsTmaExperts(const TileArgs& t, bool fp4, const ActQuantScratch& aq,
                              int64_t x_rows, int64_t total_pairs, int max_slots, dim3 grid,
                              bool gather, StreamHandle stream) {
  // (The gathered rows take the act_quant rows' pitch, MmaQuantLd(k), as the sizes assume.)
  if (t.k % kBK != 0 || t.wpitch % 16 != 0 || t.ldq != MmaQuantLd(t.k) ||
      MmaExpertQuantBytes(x_rows, total_pairs, max_slots, t.k) > aq.q_bytes ||
      MmaExpertScaleCount(x_rows, total_pairs, max_slots, t.k) > aq.s_count)
    return false;
  // The gathered rows after the act_quant rows (Prepare's) in the scratch.
  const int64_t rows_g = MmaGatheredRows(total_pairs, max_slots);
  const int64_t ldg = MmaGatheredLd(total_pairs, max_slots), nblk = t.k / kBK;
  uint8_t* const xg = aq.q + MmaGatheredQuantOffset(x_rows, t.k);
  float* const xsg_t = aq.s + MmaGatheredScaleOffset(x_rows, t.k);
  // The wide tile (KernelOptions::fp8mma_wide_experts) for FP4 weights where a slot's expected
  // pairs pass one 128-token tile: boxes of kWsWide rows, and token tiles per slot for its width
  // (as MmaExpertLinear's for 128).
  const int64_t per_slot = ExpertPairsPerSlot(total_pairs, max_slots);
  const bool wide = GetKernelOptions().fp8mma_wide_experts && fp4 && per_slot > kBN;
  const int tok = wide ? kWsWide : kBN;
  if (wide) grid.z = ExpertTileStride(per_slot, tok);
  WsArgs a{};
  if (!EncodeTensorMap2d(&a.xmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, xg, static_cast<uint64_t>(t.ldq),
                         static_cast<uint64_t>(rows_g), static_cast<uint64_t>(t.ldq), kBK,
                         static_cast<uint32_t>(tok), CU_TENSOR_MAP_SWIZZLE_128B))
    return false;
  if (gather) {
    const GatherArgs ga{t.xq,         t.ldq,     t.xs_t,  t.ld_t,      static_cast<int>(nblk),
                        t.num_active, t.offsets, t.pairs, t.x_row_div, xg,
                        xsg_t,        ldg};
    const unsigned gx = static_cast<unsigned>(std::clamp<int64_t>((per_slot + 31) / 32, 1, 16));
    LaunchKernel(MmaGatherPairsKernel, dim3(gx, static_cast<unsigned>(max_slots)), dim3(256), 0,
                 stream, ga);
    CUDA_CHECK_LAUNCH();
  }
  a.t = t;
  a.xsg_t = xsg_t;
  a.ldg = ldg;
  wide ? LaunchWs<true, kWsWide>(a, fp4, grid, stream) : LaunchWs<true, kBN>(a, fp4, grid, stream);
  return true;
}

}  // namespace fp8mma_tile

int64_t MmaWsExpertLaunches() {
  return fp8mma_tile::g_ws_launches.load() + fp8mma_tile::g_ws_tma_launches.load();
}
int64_t MmaWsTmaExpertLaunches() { return fp8mma_tile::g_ws_tma_launches.load(); }
int64_t MmaWsWideExpertLaunches() { return fp8mma_tile::g_ws_wide_launches.load(); }

}  // namespace dsinfer::backend::cuda
