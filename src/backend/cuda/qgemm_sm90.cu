// The FP8 / FP4 linear for many rows (prefill): a tiled GEMM on the tensor cores that computes
// every output element with exactly the fp32 operations of QLinearKernel (qlinear_sm90.cu), so a
// row's bits do not depend on which kernel ran it (batch invariance, prefill = decode).
//
// Per output element (weight row r, token j), QLinearKernel computes, for each k slice of kKs
// columns (a function of the format and the pair only) from a zeroed sum: per 64-column pair, FP8:
// r = four chained m16n8k16 f16 mma steps from zero over the pair's e4m3 values (exact in f16),
// then acc = fmaf(r, s_w * s_x, acc); FP4: per 32-column scale group, r = two chained steps from
// zero, blk = fmaf(r, s_w, blk), and at the end of each 128-column block acc = fmaf(blk, s_x, acc);
// and adds the slices' sums in slice order (the first slice's sum is taken as it is). This kernel
// runs the same steps: the same mma instruction with A = weights (the same fragment conversions,
// qlinear_core.cuh), B = activations with the same k per step, the same fmaf, a running total over
// the slices. Only the data movement differs: a block owns 128 weight rows and 128 / 64 tokens
// (FP8 / FP4; half for the fused SwiGLU pair) and streams both through shared memory in a 4-stage
// cp.async pipeline, so weights are read once per token tile and activations once per 128 weight
// rows (QLinearKernel re-reads every activation row once per 16 weight rows: its design point is
// decode).
//
// The same operations on warpgroup MMA: qgemm_wg_sm90.cu (KernelOptions::qgemm_wgmma).
//
// Scope: dense weights and routed experts (slots: rows through the router's pair list), one
// weight or the fused w1/w3 pair, activations pre-quantized (act_quant pre-pass: e4m3 values as
// f16, one scale per 128 columns), grouped dense input when each group spans whole 128-row blocks.
// Everything else takes QLinearKernel (LaunchQLinear decides). On from KernelOptions::
// qgemm_min_rows dense rows (`--qgemm-min-rows`, default 128) and qgemm_expert_min_rows rows per
// expert (default 32); tests/gpu's qgemm variants check its bits from 17 / 128 dense rows and one
// row per expert (passed on an H200, 2026-12-02).
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qgemm_source.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

using namespace qcore;

constexpr int kWarpsM = 4, kWarpsN = 2, kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kStages = 4;
constexpr int kBM = 128;             // weight rows per block (one 128-row scale block)
constexpr int kRowTiles = kBM / 16;  // 16-row tiles per block

// Warps 4 (rows) x 2 (tokens), each 32 weight rows (2 m16 tiles) x kWN n8 tiles. FP8: one weight
// 64 tokens per warp, the w1/w3 pair 32 (twice the accumulators); FP4 half that (its 128-column
// block sums double the accumulators again).
template <int kD, bool kFp4>
struct GCfg {
  static constexpr int kWM = 2;
  static constexpr int kWN = (kD == 1 ? 8 : 4) / (kFp4 ? 2 : 1);
  static constexpr int kBN = kWarpsN * kWN * 8;         // tokens per block
  static constexpr int kP = QCfg<kFp4, kD>::kP;         // pairs per slice (QLinearKernel's)
  static constexpr int kPairBytes = kFp4 ? 512 : 1024;  // one row tile's 64-column pair
  static constexpr int kWBytes = kD * kRowTiles * kPairBytes;
  static constexpr int kSBytes = kFp4 ? kD * kRowTiles * 32 : 0;  // FP4: the pair's scale words
  // Bytes per token row of a pair in shared memory (128 + pad): the B loads of a quarter warp (two
  // tokens' 4 lanes) hit distinct banks — FP8 lanes read 16 bytes at 32t, FP4 at 16t.
  static constexpr int kXPitch = kFp4 ? 192 : 144;
  static constexpr int kXBytes = kBN * kXPitch;
  static constexpr int kStageBytes = kWBytes + kSBytes + kXBytes + kBN * 4;
  // The running totals over the finished slices: each thread's own floats (registers would spill).
  static constexpr int kTotals = kD * kWM * kWN * 4;
  static constexpr int kSmem = kStages * kStageBytes + kTotals * kThreads * 4 + kBN * 4;
};

// Grid: dense (row blocks, token tiles, 1); routed experts (token tiles, row blocks, slots) —
// an expert's blocks over its tiles run together, so its weights are read from HBM about once —
// where each block loops over the slot's tiles tile, tile + grid tiles, ... (the slot's row count
// is on the device).
template <int kD, bool kFp4, bool kExpert>
__global__ void __launch_bounds__(kThreads, 1) QGemmKernel(QLinearArgs p) {
  using C = GCfg<kD, kFp4>;
  constexpr int kWM = C::kWM, kWN = C::kWN, kBN = C::kBN, kP = C::kP;
  constexpr int kPairBytes = C::kPairBytes, kXPitch = C::kXPitch;
  PdlTrigger();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's first m16 tile and first token in the block.
  const int rt0 = (warp % kWarpsM) * kWM;
  const int tn0 = (warp / kWarpsM) * kWN * 8;
  const int64_t row0 = static_cast<int64_t>(kExpert ? blockIdx.y : blockIdx.x) * kBM;
  const int tile0 = kExpert ? blockIdx.x : blockIdx.y;
  const int ntiles = kExpert ? gridDim.x : gridDim.y;
  const int64_t tiles_n = (p.n + 15) / 16, npairs = p.k / 64;
  const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
  const int64_t sblk = (row0 >> 7) * ((p.k + 127) >> 7);  // FP8: the row block's first scale

  // Stage s: [kD][kRowTiles][kPairBytes] weight pairs, FP4 [kD][kRowTiles][32] scale words,
  // [kBN][kXPitch] activation bytes, [kBN] act_quant scales. Then the totals and the tile's rows.
  auto w_at = [&](int s) { return smem + s * C::kStageBytes; };
  auto sw_at = [&](int s) { return smem + s * C::kStageBytes + C::kWBytes; };
  auto x_at = [&](int s) { return smem + s * C::kStageBytes + C::kWBytes + C::kSBytes; };
  auto sx_at = [&](int s) {
    return reinterpret_cast<float*>(smem + s * C::kStageBytes + C::kWBytes + C::kSBytes +
                                    C::kXBytes);
  };
  // total[j] of this thread at totals[j * kThreads], j = ((d * kWM + mi) * kWN + ni) * 4 + i.
  float* totals = reinterpret_cast<float*>(smem + kStages * C::kStageBytes) + threadIdx.x;
  // The tile's token rows: dense, the row itself; experts, the pair (x row: pair / x_row_div).
  // -1: past the slot's rows.
  int32_t* rows =
      reinterpret_cast<int32_t*>(smem + kStages * C::kStageBytes + C::kTotals * kThreads * 4);

  PdlWait();  // the activations, the act_quant pre-pass and the routing come from earlier kernels
  QGemmSource<kD> source;
  if (!ResolveQGemmSource<kD, kExpert>(p, &source)) return;
  const int64_t begin = source.begin, count = source.count;
  const uint8_t* W[kD];
  const uint8_t* SW[kD];
#pragma unroll
  for (int d = 0; d < kD; ++d) {
    W[d] = source.w[d];
    SW[d] = source.s[d];
  }

  auto load = [&](int s, int64_t kp) {
    // Weights: 16-byte chunks c of (d, row tile, pair); tiles past the matrix are zeros.
    uint8_t* ws = w_at(s);
    for (int c = threadIdx.x; c < kD * kRowTiles * (kPairBytes / 16); c += kThreads) {
      const int d = c / (kRowTiles * (kPairBytes / 16));
      const int rt = (c / (kPairBytes / 16)) % kRowTiles, off = (c % (kPairBytes / 16)) * 16;
      const int64_t grt = (row0 >> 4) + rt;
      const bool ok = grt < tiles_n;
      const uint8_t* src = W[d] + (ok ? (grt * npairs + kp) * kPairBytes + off : 0);
      CpAsync16(ws + (d * kRowTiles + rt) * kPairBytes + off, src, ok);
    }
    if constexpr (kFp4) {  // TileFp4ScalesForMma: 32 bytes per (row tile, pair)
      uint8_t* sws = sw_at(s);
      for (int c = threadIdx.x; c < kD * kRowTiles * 2; c += kThreads) {
        const int d = c / (kRowTiles * 2), rt = (c / 2) % kRowTiles, off = (c % 2) * 16;
        const int64_t grt = (row0 >> 4) + rt;
        const bool ok = grt < tiles_n;
        CpAsync16(sws + (d * kRowTiles + rt) * 32 + off,
                  SW[d] + (ok ? (grt * npairs + kp) * 32 + off : 0), ok);
      }
    }
    uint8_t* xs = x_at(s);
    // Activations: 8 chunks of 16 bytes per token (the pair's 64 f16 values).
    for (int c = threadIdx.x; c < kBN * 8; c += kThreads) {
      const int i = c / 8, off = (c % 8) * 16;
      const int32_t r = rows[i];
      const bool ok = r >= 0;
      const int64_t xr = ok ? (kExpert ? r / p.x_row_div : r) : 0;
      const uint16_t* src = p.xq + (ok ? xr * p.ldq + goff + kp * 64 : 0);
      CpAsync16(xs + i * kXPitch + off, reinterpret_cast<const uint8_t*>(src) + (ok ? off : 0), ok);
    }
    // The tokens' act_quant scales of the pair's 128-column block.
    float* ss = sx_at(s);
    for (int i = threadIdx.x; i < kBN; i += kThreads) {
      const int32_t r = rows[i];
      const bool ok = r >= 0;
      const int64_t xr = ok ? (kExpert ? r / p.x_row_div : r) : 0;
      CpAsync4(ss + i, p.xs + (ok ? xr * p.lds + (goff + kp * 64) / kQb : 0), ok);
    }
  };

  for (int64_t m0 = static_cast<int64_t>(tile0) * kBN; m0 < count;
       m0 += static_cast<int64_t>(ntiles) * kBN) {
    __syncthreads();  // the previous tile's loads and epilogue are done with rows
    for (int i = threadIdx.x; i < kBN; i += kThreads)
      rows[i] =
          m0 + i < count ? (kExpert ? p.pairs[begin + m0 + i] : static_cast<int32_t>(m0 + i)) : -1;
    __syncthreads();

    float acc[kD][kWM][kWN][4], blk[kD][kWM][kWN][4];
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
        for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[d][mi][ni][i] = blk[d][mi][ni][i] = 0.0f;

    PipelineFill<kStages>(npairs, load);
    for (int64_t kp = 0; kp < npairs; ++kp) {
      // Stage kp is in; every warp is done with stage kp - 1.
      const int s = PipelineAdvance<kStages>(kp, npairs, load);
      const uint8_t* ws = w_at(s);
      const uint8_t* xs = x_at(s);
      const float* ss = sx_at(s);
      // The warp's A fragments as f16 (PairMma's conversions) per matrix d and m tile mi, and the
      // weight scales of rows g / g+8 per 32-column step j (FP8: the pair's one block scale).
      uint32_t af[kD][kWM][4][4];
      float sg[kD][kWM][2], sh[kD][kWM][2];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
#pragma unroll
        for (int mi = 0; mi < kWM; ++mi) {
          const int rt = d * kRowTiles + rt0 + mi;
          const uint8_t* tile = ws + rt * kPairBytes + lane * 16;
          if constexpr (kFp4) {
            Fp4Fragments(*reinterpret_cast<const uint4*>(tile), af[d][mi]);
            const uint32_t sb = *reinterpret_cast<const uint32_t*>(sw_at(s) + rt * 32 + 4 * g);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              sg[d][mi][j] = Fp4GpuScale((sb >> (8 * j)) & 0xff);
              sh[d][mi][j] = Fp4GpuScale((sb >> (16 + 8 * j)) & 0xff);
            }
          } else {
            Fp8Fragments(*reinterpret_cast<const uint4*>(tile),
                         *reinterpret_cast<const uint4*>(tile + 512), af[d][mi]);
            sg[d][mi][0] = sh[d][mi][0] = sg[d][mi][1] = sh[d][mi][1] =
                ScaleAt(SW[d], p.scale_format, sblk + kp / 2);
          }
        }
      }
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni) {
        const int tl = tn0 + ni * 8;  // the n tile's first token in the block
        // B: token tl + g, step q's register pair (PairMma's order). FP8: the lane's 16 values
        // [16t, 16t + 16) of the pair; FP4: per step j, the 8 values [32j + 8t, +8).
        const uint8_t* xr = xs + (tl + g) * kXPitch;
        const uint4 v0 = *reinterpret_cast<const uint4*>(xr + (kFp4 ? 16 * t : 32 * t));
        const uint4 v1 = *reinterpret_cast<const uint4*>(xr + (kFp4 ? 64 + 16 * t : 32 * t + 16));
        const uint32_t b[4][2] = {{v0.x, v0.y}, {v0.z, v0.w}, {v1.x, v1.y}, {v1.z, v1.w}};
        const float sx0 = ss[tl + 2 * t], sx1 = ss[tl + 2 * t + 1];
#pragma unroll
        for (int d = 0; d < kD; ++d)
#pragma unroll
          for (int mi = 0; mi < kWM; ++mi)
            PairSteps<kFp4>(af[d][mi], b, sg[d][mi], sh[d][mi], sx0, sx1, acc[d][mi][ni],
                            blk[d][mi][ni]);
        if constexpr (kFp4) {
          if (BlockEnds(kp, npairs)) {
#pragma unroll
            for (int d = 0; d < kD; ++d)
#pragma unroll
              for (int mi = 0; mi < kWM; ++mi) FlushBlock(blk[d][mi][ni], sx0, sx1, acc[d][mi][ni]);
          }
        }
      }
      // A slice ends: its sum joins the total in slice order (the first slice's as it is).
      if ((kp + 1) % kP == 0 || kp + 1 == npairs) {
        const bool first = kp < kP;
#pragma unroll
        for (int d = 0; d < kD; ++d)
#pragma unroll
          for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
            for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                float& tot = totals[(((d * kWM + mi) * kWN + ni) * 4 + i) * kThreads];
                tot = first ? acc[d][mi][ni][i] : tot + acc[d][mi][ni][i];
                acc[d][mi][ni][i] = 0.0f;
              }
      }
    }
    CpAsyncWait<0>();

    // Epilogue: c0, c1 row g, tokens 2t, 2t + 1; c2, c3 row g + 8.
#pragma unroll
    for (int mi = 0; mi < kWM; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t row = row0 + (rt0 + mi) * 16 + g + 8 * (i / 2);
          const int32_t yr = rows[tn0 + ni * 8 + 2 * t + (i % 2)];
          if (row < p.n && yr >= 0) {
            const float v0 = totals[((mi * kWN + ni) * 4 + i) * kThreads];
            const float v1 = totals[((((kD - 1) * kWM + mi) * kWN + ni) * 4 + i) * kThreads];
            p.y[static_cast<int64_t>(yr) * p.ldy + row] = kD == 2 ? SwigluF(v0, v1, p.limit) : v0;
          }
        }
      }
    }
  }
}

template <int kD, bool kFp4, bool kExpert>
void LaunchQGemm(const QLinearArgs& a, int64_t rows_hint, int slots, StreamHandle stream) {
  using C = GCfg<kD, kFp4>;
  auto kernel = QGemmKernel<kD, kFp4, kExpert>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    return true;
  }();
  (void)attr_set;
  const unsigned row_blocks = static_cast<unsigned>((a.n + kBM - 1) / kBM);
  if constexpr (kExpert) {
    // Tiles per slot: those of the expected rows (a slot with more loops over them).
    const int64_t tiles = std::min<int64_t>((rows_hint + C::kBN - 1) / C::kBN, 65535);
    const dim3 grid(static_cast<unsigned>(std::max<int64_t>(tiles, 1)), row_blocks,
                    static_cast<unsigned>(slots));
    LaunchKernel(kernel, grid, dim3(kThreads), C::kSmem, stream, a);
  } else {
    const dim3 grid(row_blocks, static_cast<unsigned>((a.m + C::kBN - 1) / C::kBN));
    LaunchKernel(kernel, grid, dim3(kThreads), C::kSmem, stream, a);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// Called by LaunchQLinear after its own checks (FP8 block 128, FP4 rows in 16-row tiles, grouped
// input in 16-row groups with 128-column offsets, pre-quantized rows at least as wide as the
// input); these are the tiled kernel's own conditions on top.
bool QGemmSupports(const QLinearArgs& a, bool fp4, bool expert) {
  // (The smaller token tile of the two: the pair's.) Then 16-byte cp.async sources: the
  // pre-quantized rows' pitch and start in whole 16-byte chunks.
  return QGemmShapeSupported(a, fp4, expert, kBM, GCfg<2, false>::kBN) && a.xq != nullptr &&
         a.xs != nullptr && a.ldq % 8 == 0 && (reinterpret_cast<uintptr_t>(a.xq) & 15) == 0;
}

namespace {
std::atomic<int64_t> g_launches{0};
}  // namespace

int64_t QGemmLaunches() { return g_launches.load(); }

void LaunchQGemm(const QLinearArgs& a, bool fp4, bool dual, int64_t rows_hint, int slots,
                 StreamHandle stream) {
  ++g_launches;
  auto go = [&](auto d_c, auto fp4_c, auto expert_c) {
    constexpr bool kFp4 = decltype(fp4_c)::value, kExpert = decltype(expert_c)::value;
    if constexpr (kExpert || !kFp4) {  // dense FP4: not supported (QGemmSupports)
      LaunchQGemm<decltype(d_c)::value ? 2 : 1, kFp4, kExpert>(a, rows_hint, slots, stream);
    }
  };
  auto with = [](bool v, auto fn) {
    if (v)
      fn(std::true_type{});
    else
      fn(std::false_type{});
  };
  with(dual,
       [&](auto d) { with(fp4, [&](auto f) { with(slots > 0, [&](auto e) { go(d, f, e); }); }); });
}

}  // namespace dsinfer::backend::cuda
