// The tiled FP8 / FP4 GEMM on warpgroup MMA (KernelOptions::qgemm_wgmma, the default; `--qgemm-mma
// sync` takes qgemm_sm90.cu's mma.sync kernel instead):
// the operations of QGemmKernel (qgemm_sm90.cu) and so of QLinearKernel — per output element,
// per k slice from zero, per 64-column pair: FP8 r = four chained k16 steps from zero, acc =
// fmaf(r, s_w * s_x, acc); FP4 per 32-column group r = two steps from zero, blk = fmaf(r, s_w,
// blk), at each 128-column block's end acc = fmaf(blk, s_x, acc); the slices' sums added in slice
// order — with wgmma in place of mma.sync (each k16 step rounds as mma.sync does:
// bench/probe_wgmma_bits.cu), so a row's bits are those of the decode kernel.
//
// Data movement: a block of two warpgroups owns 128 tokens and 128 weight rows (one weight: a
// warpgroup's 64 rows each) or 64 rows of both matrices of the fused SwiGLU pair (a warpgroup per
// matrix); every k16 step is one m64n128k16 per warpgroup, A = the warp's m16 tile converted from
// the pre-tiled weights (the decode kernel's fragments), B = the 128 tokens from shared memory
// (FP4: as two m64n64k16, the token halves in separate commit groups, so a warp scales one half
// while the other's chain runs; an n8 tile's result does not depend on the instruction's N).
// The activations come in the staged order (QOrder kWgFp8 / kWgFp4, written by the act_quant
// pre-pass), so each token's (k16 step, k half) is a 16-byte cp.async straight into its wgmma
// core-matrix row. Weights, scales and activations stream through a 4-stage cp.async pipeline of
// 64-column pairs whose stages are filled and released through mbarriers (no block-wide barrier
// per pair: the warpgroups drift apart, so one's scale steps run while the other's wgmma does;
// docs/perf.md); the slices' running totals sit in shared memory, each thread's own. Dense FP8
// launches take its warp-specialized form instead (qgemm_ws_sm90.cu: TMA, a producer warp).
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qgemm_source.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/wgmma.cuh"
#include "base/check.h"

namespace dsinfer::backend::cuda {

namespace {

using namespace qcore;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kStages = 4;
constexpr int kBN = 128;      // tokens per block: the wgmma's N
constexpr int kF = kBN / 2;   // accumulator floats per thread
constexpr int kNT = kBN / 8;  // n8 tiles of the accumulator (mma.sync's C fragments)

template <int kD, bool kFp4>
struct WgCfg {
  static constexpr int kRows = 128 / kD;  // weight rows per block
  static constexpr int kRowTiles = kRows / 16;
  static constexpr int kTiles = kD * kRowTiles;  // m16 tiles per stage: one per warp
  static constexpr int kP = QCfg<kFp4, kD>::kP;  // pairs per slice (QLinearKernel's)
  static constexpr int kPairBytes = kFp4 ? 512 : 1024;
  static constexpr int kWBytes = kTiles * kPairBytes;
  static constexpr int kSBytes = kFp4 ? kTiles * 32 : 0;  // FP4: the pair's scale words
  static constexpr int kXBytes = kBN * 128;  // [4 steps][2 halves][kBN tokens][16 bytes]
  static constexpr int kStageBytes = kWBytes + kSBytes + kXBytes + kBN * 4;
  static constexpr int kSmem =
      kStages * kStageBytes + kF * kThreads * 4 + kBN * 12 + 2 * kStages * 8;
  static_assert(kTiles * 32 == kThreads, "one m16 tile per warp");
};

__device__ __forceinline__ float Elem(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Grid: dense (row blocks, token tiles, 1); routed experts (token tiles, row blocks, slots), a
// block looping over its slot's tiles tile, tile + grid tiles, ... (QGemmKernel's grid).
template <int kD, bool kFp4, bool kExpert>
__global__ void __launch_bounds__(kThreads, 1) QGemmWgKernel(QLinearArgs p) {
  using C = WgCfg<kD, kFp4>;
  constexpr int kP = C::kP, kPairBytes = C::kPairBytes;
  PdlTrigger();
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's m16 tile: stage tile `warp` = (matrix d, row tile rt); one weight: warpgroup w
  // takes row tiles 4w .. 4w + 3; the pair: warpgroup w takes matrix w.
  const int d = warp / C::kRowTiles, rt = warp % C::kRowTiles;
  const int64_t row0 = static_cast<int64_t>(kExpert ? blockIdx.y : blockIdx.x) * C::kRows;
  const int tile0 = kExpert ? blockIdx.x : blockIdx.y;
  const int ntiles = kExpert ? gridDim.x : gridDim.y;
  const int64_t tiles_n = (p.n + 15) / 16, npairs = p.k / 64;
  const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
  const int64_t sblk = (row0 >> 7) * ((p.k + 127) >> 7);  // FP8: the row block's first scale

  auto w_at = [&](int s) { return smem + s * C::kStageBytes; };
  auto sw_at = [&](int s) { return smem + s * C::kStageBytes + C::kWBytes; };
  auto x_at = [&](int s) { return smem + s * C::kStageBytes + C::kWBytes + C::kSBytes; };
  auto sx_at = [&](int s) {
    return reinterpret_cast<float*>(smem + s * C::kStageBytes + C::kWBytes + C::kSBytes +
                                    C::kXBytes);
  };
  // This thread's totals of n8 tile ni (its 4 C-fragment registers) at totals[ni * kThreads].
  float4* totals = reinterpret_cast<float4*>(smem + kStages * C::kStageBytes) + threadIdx.x;
  // The tile's token rows: dense, the row itself; experts, the pair (x row: pair / x_row_div);
  // -1: past the slot's rows. xoff / soff: their quantized row's and scale row's offsets
  // (the group's columns included; the launcher keeps them below 2^31).
  int32_t* rows = reinterpret_cast<int32_t*>(smem + kStages * C::kStageBytes + kF * kThreads * 4);
  int32_t* xoff = rows + kBN;
  int32_t* soff = xoff + kBN;
  // The pipeline's barriers: full[s] completes when every thread's copies into stage s have
  // landed, empty[s] when every thread is done reading it. No block-wide barrier per pair, so
  // one warpgroup's scale steps overlap the other's wgmma.
  uint64_t* full = reinterpret_cast<uint64_t*>(soff + kBN);
  uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(full + s, kThreads);
      MbarInit(empty + s, kThreads);
    }
  }
  __syncthreads();

  PdlWait();  // the activations, the act_quant pre-pass and the routing come from earlier kernels
  QGemmSource<kD> source;
  if (!ResolveQGemmSource<kD, kExpert>(p, &source)) return;
  const int64_t begin = source.begin, count = source.count;
  // Matrix i's pointers without a dynamic index into the arrays (registers, not local memory).
  auto wsel = [&](int i) { return kD == 2 && i == 1 ? source.w[kD - 1] : source.w[0]; };
  auto swsel = [&](int i) { return kD == 2 && i == 1 ? source.s[kD - 1] : source.s[0]; };
  const uint8_t* const my_sw = swsel(d);

  // Each thread's copies of a stage, in fixed counts (straight-line code), from sources set up
  // once (weights: per kernel; activations: per token tile) and advanced by the pair.
  constexpr int kWChunks = C::kTiles * (kPairBytes / 16), kWPer = kWChunks / kThreads;
  constexpr int kXPer = kBN * 8 / kThreads;
  static_assert(kWChunks % kThreads == 0 && kBN * 8 % kThreads == 0 && kBN <= kThreads);
  // Weights: thread chunk c = threadIdx.x + it * kThreads of (stage tile, pair) at byte c * 16 of
  // the stage; tiles past the matrix are zeros (null source).
  const uint8_t* wsrc[kWPer];
#pragma unroll
  for (int it = 0; it < kWPer; ++it) {
    const int c = threadIdx.x + it * kThreads;
    const int i = c / (kPairBytes / 16), off = (c % (kPairBytes / 16)) * 16;
    const int64_t grt = (row0 >> 4) + i % C::kRowTiles;
    wsrc[it] = grt < tiles_n ? wsel(i / C::kRowTiles) + grt * npairs * kPairBytes + off : nullptr;
  }
  // FP4 scales (TileFp4ScalesForMma: 32 bytes per (row tile, pair)), threads < 2 * kTiles.
  const uint8_t* swsrc = nullptr;
  if constexpr (kFp4) {
    if (threadIdx.x < C::kTiles * 2) {
      const int i = threadIdx.x / 2;
      const int64_t grt = (row0 >> 4) + i % C::kRowTiles;
      if (grt < tiles_n)
        swsrc = swsel(i / C::kRowTiles) + grt * npairs * 32 + (threadIdx.x % 2) * 16;
    }
  }
  // Activations: the pair's 8 staged 16-byte chunks per token (chunk h = step h / 2, k half
  // h % 2) to [h][token]; a warp takes 8 tokens x 4 chunks (full sectors, conflict-free rows), a
  // thread chunk h of the tokens xtok(it). xo / so: the tile's offsets (xoff, soff) of those.
  const int xh = (threadIdx.x / 8) % 8;
  auto xtok = [&](int it) {
    return (threadIdx.x / 64 + it * (kThreads / 64)) * 8 + threadIdx.x % 8;
  };
  int32_t xo[kXPer], so = -1;
  auto load = [&](int s, int64_t kp) {
    uint8_t* ws = w_at(s);
#pragma unroll
    for (int it = 0; it < kWPer; ++it) {
      const uint8_t* src = wsrc[it];
      CpAsync16(ws + (threadIdx.x + it * kThreads) * 16,
                src != nullptr ? src + kp * kPairBytes : wsel(0), src != nullptr);
    }
    if constexpr (kFp4) {
      if (threadIdx.x < C::kTiles * 2)
        CpAsync16(sw_at(s) + threadIdx.x * 16, swsrc != nullptr ? swsrc + kp * 32 : wsel(0),
                  swsrc != nullptr);
    }
    uint8_t* xs = x_at(s);
#pragma unroll
    for (int it = 0; it < kXPer; ++it) {
      const int32_t o = xo[it];
      CpAsync16(xs + (xh * kBN + xtok(it)) * 16, p.xq + (o >= 0 ? o + kp * 64 + 8 * xh : 0),
                o >= 0);
    }
    // The tokens' act_quant scales of the pair's 128-column block.
    if (threadIdx.x < kBN)
      CpAsync4(sx_at(s) + threadIdx.x, p.xs + (so >= 0 ? so + kp / 2 : 0), so >= 0);
  };

  // Fills and uses of the stages so far (the same count in every thread): fill f goes to stage
  // f % kStages and waits for the use f - kStages to be released.
  uint32_t fills = 0, uses = 0;
  auto produce = [&](int64_t kp) {
    const int s = static_cast<int>(fills % kStages);
    RingWaitEmpty<kStages>(empty, fills);
    load(s, kp);
    CpAsyncMbarArrive(full + s);
    ++fills;
  };

  for (int64_t m0 = static_cast<int64_t>(tile0) * kBN; m0 < count;
       m0 += static_cast<int64_t>(ntiles) * kBN) {
    __syncthreads();  // the previous tile's loads and epilogue are done with rows and totals
    if (threadIdx.x < kBN) {
      const int i = threadIdx.x;
      const int32_t r =
          m0 + i < count ? (kExpert ? p.pairs[begin + m0 + i] : static_cast<int32_t>(m0 + i)) : -1;
      const int64_t xr = kExpert ? r / p.x_row_div : r;
      rows[i] = r;
      xoff[i] = r >= 0 ? static_cast<int32_t>(xr * p.ldq + goff) : -1;
      soff[i] = r >= 0 ? static_cast<int32_t>(xr * p.lds + goff / kQb) : -1;
    }
    __syncthreads();
#pragma unroll
    for (int it = 0; it < kXPer; ++it) xo[it] = xoff[xtok(it)];
    if (threadIdx.x < kBN) so = soff[threadIdx.x];

    float acc[kNT][4], blk[kNT][4];
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[ni][i] = blk[ni][i] = 0.0f;

    for (int64_t kp = 0; kp < kStages - 1 && kp < npairs; ++kp) produce(kp);
    for (int64_t kp = 0; kp < npairs; ++kp) {
      const int s = static_cast<int>(uses % kStages);
      RingWaitFull<kStages>(full, uses);
      FenceProxyAsync();  // the stage's copies (every thread's), seen by wgmma's reads
      const uint8_t* wt = w_at(s) + warp * kPairBytes + lane * 16;
      const float* ss = sx_at(s);
      // Step q's B: [2 k halves][kBN tokens][16 bytes] (WgmmaDescB) at byte q * kBN * 32.
      const uint32_t xb = SmemAddr(x_at(s));
      // The warp's A fragments (PairMma's conversions) and the scales of rows g / g + 8 per
      // 32-column group j (FP8: the pair's one block scale).
      uint32_t af[4][4];
      float sg[2], sh[2];
      if constexpr (kFp4) {
        Fp4Fragments(*reinterpret_cast<const uint4*>(wt), af);
        const uint32_t sb = *reinterpret_cast<const uint32_t*>(sw_at(s) + warp * 32 + 4 * g);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          sg[j] = Fp4GpuScale((sb >> (8 * j)) & 0xff);
          sh[j] = Fp4GpuScale((sb >> (16 + 8 * j)) & 0xff);
        }
      } else {
        Fp8Fragments(*reinterpret_cast<const uint4*>(wt), *reinterpret_cast<const uint4*>(wt + 512),
                     af);
        sg[0] = sh[0] = sg[1] = sh[1] = ScaleAt(my_sw, p.scale_format, sblk + kp / 2);
      }
      // The next stage's copies go out while the first wgmma runs.
      auto refill = [&] {
        if (kp + kStages - 1 < npairs) produce(kp + kStages - 1);
      };
      if constexpr (kFp4) {
        // FP4: each k16 step runs as two m64n64k16, tokens [0, 64) into ra and [64, 128) into rb
        // (an n8 tile's result does not depend on the instruction's N: probe_wgmma_bits), so one
        // half's scale steps run while the other half's chain is on the tensor cores.
        constexpr int kH = kBN / 2, kHT = kNT / 2;
        auto hdesc = [&](int step, int half) {
          return WgmmaDescB<kBN>(xb + step * kBN * 32 + half * kH * 16);
        };
        auto chain = [&](float(&r)[kH / 2], int half, int q0, int nq) {
          WgmmaFence();
#pragma unroll
          for (int q = q0; q < q0 + nq; ++q) Wgmma<kH>(r, af[q], hdesc(q, half), q > q0);
          WgmmaCommit();
        };
        float ra[kH / 2], rb[kH / 2];
        // Per group j: its 2 steps from zero, then the rows' scale into blk (GroupIntoBlock).
        auto group = [&](float(&r)[kH / 2], int half, int j) {
          WgmmaFenceOperand(r);
#pragma unroll
          for (int ni = 0; ni < kHT; ++ni)
            GroupIntoBlock(r + 4 * ni, sg[j], sh[j], blk[half * kHT + ni]);
        };
        chain(ra, 0, 0, 2);
        chain(rb, 1, 0, 2);
        refill();
        WgmmaWait<1>();
        group(ra, 0, 0);
        chain(ra, 0, 2, 2);
        WgmmaWait<1>();
        group(rb, 1, 0);
        chain(rb, 1, 2, 2);
        WgmmaWait<1>();
        group(ra, 0, 1);
        WgmmaWait<0>();
        WgmmaFenceOperand(af);
        group(rb, 1, 1);
        if (BlockEnds(kp, npairs)) {
#pragma unroll
          for (int ni = 0; ni < kNT; ++ni) {
            const float2 sx = *reinterpret_cast<const float2*>(ss + ni * 8 + 2 * t);
            FlushBlock(blk[ni], sx.x, sx.y, acc[ni]);
          }
        }
      } else {
        // The pair's 4 steps from zero over all 128 tokens (split in halves it measured slower:
        // docs/perf.md), then s_w * s_x into acc (PairIntoAcc).
        float r[kF];
        WgmmaFence();
#pragma unroll
        for (int q = 0; q < 4; ++q) Wgmma<kBN>(r, af[q], WgmmaDescB<kBN>(xb + q * kBN * 32), q > 0);
        WgmmaCommit();
        refill();
        WgmmaWait<0>();
        WgmmaFenceOperand(r);
        WgmmaFenceOperand(af);
#pragma unroll
        for (int ni = 0; ni < kNT; ++ni) {
          const float2 sx = *reinterpret_cast<const float2*>(ss + ni * 8 + 2 * t);
          PairIntoAcc(r + 4 * ni, sg[0], sh[0], sx.x, sx.y, acc[ni]);
        }
      }
      MbarArrive(empty + s);  // this thread is done with the stage (its wgmma reads included)
      ++uses;
      // A slice ends: its sum joins the total in slice order (the first slice's as it is).
      if ((kp + 1) % kP == 0 || kp + 1 == npairs) SliceIntoTotals(acc, totals, kThreads, kp < kP);
    }

    // Epilogue: C fragment (n8 tile ni, register i): row g + 8 * (i / 2), token 8 ni + 2t + i % 2.
    // The pair: warpgroup 0 finishes with warpgroup 1's total of the same element.
    if constexpr (kD == 2) {
      __syncthreads();
      if (d != 0) continue;
    }
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = row0 + rt * 16 + g + 8 * (i / 2);
        const int32_t yr = rows[ni * 8 + 2 * t + (i % 2)];
        if (row < p.n && yr >= 0) {
          float v = Elem(totals[ni * kThreads], i);
          if constexpr (kD == 2) v = SwigluF(v, Elem(totals[ni * kThreads + 128], i), p.limit);
          p.y[static_cast<int64_t>(yr) * p.ldy + row] = v;
        }
      }
    }
  }
}

template <int kD, bool kFp4, bool kExpert>
void Launch(const QLinearArgs& a, int64_t rows_hint, int slots, StreamHandle stream) {
  using C = WgCfg<kD, kFp4>;
  auto kernel = QGemmWgKernel<kD, kFp4, kExpert>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    return true;
  }();
  (void)attr_set;
  const unsigned row_blocks = static_cast<unsigned>((a.n + C::kRows - 1) / C::kRows);
  if constexpr (kExpert) {
    // Tiles per slot: those of the expected rows (a slot with more loops over them).
    const int64_t tiles = std::min<int64_t>((rows_hint + kBN - 1) / kBN, 65535);
    const dim3 grid(static_cast<unsigned>(std::max<int64_t>(tiles, 1)), row_blocks,
                    static_cast<unsigned>(slots));
    LaunchKernel(kernel, grid, dim3(kThreads), C::kSmem, stream, a);
  } else {
    const dim3 grid(row_blocks, static_cast<unsigned>((a.m + kBN - 1) / kBN));
    LaunchKernel(kernel, grid, dim3(kThreads), C::kSmem, stream, a);
  }
  CUDA_CHECK_LAUNCH();
}

std::atomic<int64_t> g_launches{0};

}  // namespace

bool QGemmWgSupports(const QLinearArgs& a, bool fp4, bool dual, bool expert) {
  return dual ? QGemmShapeSupported(a, fp4, expert, WgCfg<2, false>::kRows, kBN)
              : QGemmShapeSupported(a, fp4, expert, WgCfg<1, false>::kRows, kBN);
}

int64_t QGemmWgLaunches() { return g_launches.load(); }

void LaunchQGemmWg(const QLinearArgs& a, bool fp4, bool dual, int64_t rows_hint, int slots,
                   StreamHandle stream) {
  const bool expert = slots > 0;
  // The launcher's contract (LaunchQLinear checks these first): staged rows given, a shape this
  // kernel takes (so never dense FP4).
  DSINFER_CHECK_MSG(a.xq != nullptr && a.xs != nullptr && QGemmWgSupports(a, fp4, dual, expert),
                    "the wgmma GEMM called outside QGemmWgSupports");
  ++g_launches;
  // Dense FP8 whose staged rows the TMA can read: the warp-specialized kernel (the same bits).
  if (TryLaunchQGemmWs(a, fp4, expert, dual, stream)) return;
  DSINFER_CHECK_MSG(!a.xs_t, "transposed act_quant scales reach only the warp-specialized GEMM");
  if (dual) {
    if (fp4) {
      Launch<2, true, true>(a, rows_hint, slots, stream);  // FP4: routed experts only
    } else if (expert) {
      Launch<2, false, true>(a, rows_hint, slots, stream);
    } else {
      Launch<2, false, false>(a, rows_hint, slots, stream);
    }
  } else {
    if (fp4) {
      Launch<1, true, true>(a, rows_hint, slots, stream);
    } else if (expert) {
      Launch<1, false, true>(a, rows_hint, slots, stream);
    } else {
      Launch<1, false, false>(a, rows_hint, slots, stream);
    }
  }
}

}  // namespace dsinfer::backend::cuda
