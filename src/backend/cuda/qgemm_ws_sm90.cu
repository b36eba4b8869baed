// The dense FP8 tiled GEMM, warp-specialized (LaunchQGemmWg takes it for dense FP8 weights through
// TryLaunchQGemmWs): the operations of QGemmWgKernel (qgemm_wg_sm90.cu) and so of QLinearKernel —
// per output element, per k slice from zero, per 64-column pair r = four chained wgmma k16 steps
// from zero, acc = fmaf(r, s_w * s_x, acc) (PairIntoAcc); the slices' sums added in slice order —
// so a row's bits are those of the decode kernel.
//
// What differs is the data movement. QGemmWgKernel's 256 threads each issued 16-byte cp.async
// copies of every stage (about 1.2 L2 sectors per request; the L2 65% busy with the tensor pipe
// 22% active; ncu, docs/perf.md), then converted A and waited on their own copies. Here one
// producer warp feeds a ring of stages: the 128 tokens' staged activations of a 64-column pair as
// one TMA box (128 rows x 128 bytes, landing in the 128-byte swizzle that wgmma's descriptor
// reads), the weight tiles as 1 KB bulk copies, and the tokens' act_quant scales (transposed by the
// pre-pass: one 512-byte bulk copy; in their natural order: 4-byte copies, one per token),
// all completing on the stage's mbarrier. Two consumer warpgroups (a block's 128 weight rows, 64
// each, or 64 rows of both matrices of the fused SwiGLU pair) issue the pair's four m64n128k16,
// convert the next pair's A fragments while those run, then scale. Blocks are persistent (one per
// SM) and walk the output tiles in groups of kGroupRows row blocks, so the weights and activations
// in flight stay in L2.
#include <cuda.h>
#include <cudaTypedefs.h>

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
#include "backend/cuda/runtime.h"
#include "backend/cuda/tile_order.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"
#include "base/check.h"

namespace dsinfer::backend::cuda {

bool EncodeTensorMap2d(CUtensorMap* map, CUtensorMapDataType type, const void* base, uint64_t inner,
                       uint64_t outer, uint64_t row_bytes, uint32_t box_inner, uint32_t box_outer,
                       CUtensorMapSwizzle swizzle) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {inner, outer}, strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer}, elem[2] = {1, 1};
  return encode(map, type, 2, const_cast<void*>(base), dims, strides, box, elem,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

namespace {

using namespace qcore;

constexpr int kConsumers = 256;             // two warpgroups
constexpr int kThreads = kConsumers + 128;  // and the producer warpgroup (one warp of it works)
using Regs = WsRegs<kThreads, 40, 232>;
constexpr int kStages = 5;
constexpr int kBN = 128;       // tokens per tile: the wgmma's N
constexpr int kF = kBN / 2;    // accumulator floats per thread
constexpr int kNT = kBN / 8;   // n8 tiles of the accumulator
constexpr int kGroupRows = 8;  // row blocks walked together (L2 reuse)
// A stage: the activations' box (1024-byte aligned for the swizzle), 8 weight tiles of 1 KB, the
// tokens' scales; padded to keep the next stage's box aligned.
constexpr int kXBytes = kBN * 128, kWBytes = 8 * 1024, kSxBytes = kBN * 4;
constexpr int kStageBytes = (kXBytes + kWBytes + kSxBytes + 1023) / 1024 * 1024;
constexpr int kSmem = kStages * kStageBytes + kF * kConsumers * 4 + 2 * kStages * 8 + 1024;

struct WsArgs {
  CUtensorMap xmap;  // the staged activations, f16 [x rows][width], boxes of 128 rows x 64
  QLinearArgs p;
  int64_t row_blocks, token_tiles;
};

template <int kD>
__global__ void __launch_bounds__(kThreads, 1) QGemmWsKernel(const __grid_constant__ WsArgs args) {
  constexpr int kRows = 128 / kD, kRowTiles = kRows / 16, kP = QCfg<false, kD>::kP;
  const QLinearArgs& p = args.p;
  PdlTrigger();
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignSmem1024(smem_raw);
  auto x_at = [&](int s) { return smem + s * kStageBytes; };
  auto w_at = [&](int s) { return smem + s * kStageBytes + kXBytes; };
  auto sx_at = [&](int s) {
    return reinterpret_cast<float*>(smem + s * kStageBytes + kXBytes + kWBytes);
  };
  float4* totals_all = reinterpret_cast<float4*>(smem + kStages * kStageBytes);
  // full[s]: the producer's expect_tx arrival and (natural scales) its 32 lanes' scale copies,
  // plus the bytes of the box, the weight tiles (and the transposed scales); empty[s]: one arrival
  // per consumer warp.
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes + kF * kConsumers * 4);
  uint64_t* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(full + s, p.xs_t ? 1 : 1 + 32);
      MbarInit(empty + s, kConsumers / 32);
    }
    FenceMbarInit();
  }
  __syncthreads();
  PdlWait();  // the activations and their act_quant pre-pass come from earlier kernels

  const int64_t npairs = p.k / 64, tiles_n = (p.n + 15) / 16;
  const int64_t ntiles = args.row_blocks * args.token_tiles;
  auto wsel = [&](int i) {
    return static_cast<const uint8_t*>(kD == 2 && i == 1 ? p.w[1] : p.w[0]);
  };

  if (warp >= kConsumers / 32) {  // the producer warpgroup: its registers go to the consumers
    Regs::Producer();
    if (warp != kConsumers / 32) return;
    uint32_t fills = 0;
    for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
      int64_t rb, tt;
      TileCoords(t, args.row_blocks, args.token_tiles, kGroupRows, &rb, &tt);
      const int64_t row0 = rb * kRows, m0 = tt * kBN;
      const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
      // The weight tiles that exist (stage tile i: matrix i / kRowTiles, row tile i % kRowTiles).
      uint32_t wbytes = 0;
      for (int i = 0; i < 8; ++i) wbytes += (row0 >> 4) + i % kRowTiles < tiles_n ? 1024 : 0;
      for (int64_t kp = 0; kp < npairs; ++kp, ++fills) {
        const int s = static_cast<int>(fills % kStages);
        RingWaitEmpty<kStages>(empty, fills);
        if (lane == 0) {
          MbarArriveExpectTx(full + s, kXBytes + wbytes + (p.xs_t ? kSxBytes : 0));
          if (p.xs_t)  // the tile's tokens' scales of the pair's column block, contiguous
            BulkLoad(sx_at(s), p.xs + (goff / kQb + kp / 2) * p.lds + m0, kSxBytes, full + s);
          TmaLoad2d(x_at(s), &args.xmap, static_cast<int32_t>(goff + kp * 64),
                    static_cast<int32_t>(m0), full + s);
          for (int i = 0; i < 8; ++i) {
            const int64_t grt = (row0 >> 4) + i % kRowTiles;
            if (grt < tiles_n)
              BulkLoad(w_at(s) + i * 1024, wsel(i / kRowTiles) + (grt * npairs + kp) * 1024, 1024,
                       full + s);
          }
        }
        if (!p.xs_t) {  // natural scales: a 4-byte copy per token, 32 lanes' arrivals
#pragma unroll
          for (int j = 0; j < kBN / 32; ++j) {
            const int64_t tok = m0 + lane + 32 * j;
            const bool ok = tok < p.m;
            CpAsync4(sx_at(s) + lane + 32 * j, p.xs + (ok ? tok * p.lds + goff / kQb + kp / 2 : 0),
                     ok);
          }
          CpAsyncMbarArrive(full + s);
        }
      }
    }
    return;
  }

  Regs::Consumer();
  // Consumers: warp w's m16 tile is stage tile w (matrix d, row tile rt).
  const int g = lane / 4, t4 = lane % 4;
  const int d = warp / kRowTiles, rt = warp % kRowTiles;
  const uint8_t* const my_sw = static_cast<const uint8_t*>(kD == 2 && d == 1 ? p.s[1] : p.s[0]);
  float4* totals = totals_all + threadIdx.x;  // n8 tile ni at totals[ni * kConsumers]
  uint32_t uses = 0;
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int64_t rb, tt;
    TileCoords(t, args.row_blocks, args.token_tiles, kGroupRows, &rb, &tt);
    const int64_t row0 = rb * kRows, m0 = tt * kBN;
    const int64_t sblk = (row0 >> 7) * ((p.k + 127) >> 7);  // the row block's first scale

    // Waits for use u's stage, then the warp's A fragments of it and the pair's weight scale.
    auto take_a = [&](uint32_t u, int64_t kp, uint32_t(&af)[4][4], float& sw) {
      const int s = static_cast<int>(u % kStages);
      RingWaitFull<kStages>(full, u);
      const uint8_t* wt = w_at(s) + warp * 1024 + lane * 16;
      Fp8Fragments(*reinterpret_cast<const uint4*>(wt), *reinterpret_cast<const uint4*>(wt + 512),
                   af);
      sw = ScaleAt(my_sw, p.scale_format, sblk + kp / 2);
    };
    float acc[kNT][4];
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[ni][i] = 0.0f;
    uint32_t af[4][4];
    float sw;
    take_a(uses, 0, af, sw);
    for (int64_t kp = 0; kp < npairs; ++kp, ++uses) {
      const int s = static_cast<int>(uses % kStages);
      const uint32_t xb = SmemAddr(x_at(s));
      float r[kF];
      WgmmaFence();
#pragma unroll
      for (int q = 0; q < 4; ++q) Wgmma<kBN>(r, af[q], WgmmaDescSw128(xb + q * 32), q > 0);
      WgmmaCommit();
      // The next pair's A fragments while this pair's steps run.
      uint32_t an[4][4];
      float swn = 0.0f;
      if (kp + 1 < npairs) take_a(uses + 1, kp + 1, an, swn);
      WgmmaWait<0>();
      WgmmaFenceOperand(r);
      WgmmaFenceOperand(af);  // an must not take af's registers before the wait
      const float* ss = sx_at(s);
#pragma unroll
      for (int ni = 0; ni < kNT; ++ni) {
        const float2 sx = *reinterpret_cast<const float2*>(ss + ni * 8 + 2 * t4);
        PairIntoAcc(r + 4 * ni, sw, sw, sx.x, sx.y, acc[ni]);
      }
      __syncwarp();
      if (lane == 0) MbarArrive(empty + s);  // the warp is done with the stage
      // A slice ends: its sum joins the total in slice order (the first slice's as it is).
      if ((kp + 1) % kP == 0 || kp + 1 == npairs) SliceIntoTotals(acc, totals, kConsumers, kp < kP);
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) af[q][i] = an[q][i];
      sw = swn;
    }

    // Epilogue: C fragment (n8 tile ni, register i): row g + 8 * (i / 2), token 8 ni + 2t + i % 2.
    // The pair: warpgroup 0 finishes with warpgroup 1's total of the same element, and both wait
    // before the next tile's totals overwrite it.
    if constexpr (kD == 2) NamedBarrier<1, kConsumers>();
    if (kD == 1 || d == 0) {
#pragma unroll
      for (int ni = 0; ni < kNT; ++ni) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t row = row0 + rt * 16 + g + 8 * (i / 2);
          const int64_t tok = m0 + ni * 8 + 2 * t4 + (i % 2);
          if (row < p.n && tok < p.m) {
            const float4 tot = totals[ni * kConsumers];
            float v = i == 0 ? tot.x : i == 1 ? tot.y : i == 2 ? tot.z : tot.w;
            if constexpr (kD == 2) {
              const float4 u = totals[ni * kConsumers + 128];
              v = SwigluF(v, i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w, p.limit);
            }
            p.y[tok * p.ldy + row] = v;
          }
        }
      }
    }
    if constexpr (kD == 2) NamedBarrier<1, kConsumers>();
  }
}

template <int kD>
void Launch(const WsArgs& a, StreamHandle stream) {
  auto kernel = QGemmWsKernel<kD>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)attr_set;
  const int64_t tiles = a.row_blocks * a.token_tiles;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, SmCount())));
  LaunchKernel(kernel, grid, dim3(kThreads), kSmem, stream, a);
  CUDA_CHECK_LAUNCH();
}

// The activations' tensor map (false: the driver refused it).
bool XMap(const QLinearArgs& a, CUtensorMap* map) {
  const int64_t width = a.group_rows > 0 ? ((a.n - 1) / a.group_rows) * a.group_stride + a.k : a.k;
  return EncodeTensorMap2d(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, a.xq, static_cast<uint64_t>(width),
                           static_cast<uint64_t>(a.m), static_cast<uint64_t>(a.ldq) * 2, 64, kBN,
                           CU_TENSOR_MAP_SWIZZLE_128B);
}

std::atomic<int64_t> g_ws_launches{0}, g_ws_scales_t_launches{0};

}  // namespace

int64_t QGemmWsLaunches() { return g_ws_launches.load(); }
int64_t QGemmWsScalesTLaunches() { return g_ws_scales_t_launches.load(); }

bool TryLaunchQGemmWs(const QLinearArgs& a, bool fp4, bool expert, bool dual, StreamHandle stream) {
  if (fp4 || expert || a.xq == nullptr || a.xs == nullptr) return false;
  if ((reinterpret_cast<uintptr_t>(a.xq) & 15) != 0 || a.ldq % 8 != 0) return false;
  if (a.xs_t && ((reinterpret_cast<uintptr_t>(a.xs) & 15) != 0 || a.lds % kBN != 0)) return false;
  WsArgs w{};
  if (!XMap(a, &w.xmap)) return false;
  ++g_ws_launches;
  if (a.xs_t) ++g_ws_scales_t_launches;
  w.p = a;
  w.row_blocks = (a.n + (dual ? 64 : 128) - 1) / (dual ? 64 : 128);
  w.token_tiles = (a.m + kBN - 1) / kBN;
  if (dual) {
    Launch<2>(w, stream);
  } else {
    Launch<1>(w, stream);
  }
  return true;
}

}  // namespace dsinfer::backend::cuda
