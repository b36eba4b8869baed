// The bf16 tensor-core linear for many rows on warpgroup MMA (bf16_tc_linear.cuh; launched by
// LaunchBf16TcLinear from kBf16TcWgRows rows, or when a test asks for Bf16TcTile::kWg).
//
// Every element keeps the chains of Bf16TcManyKernel / Bf16TcFewKernel: per k slice, from zero,
// per 16-column step the three parts' products x3, x2, x1 accumulated in that order, the slices'
// results summed in slice order. wgmma m64nNk16 accumulates each step as mma.sync m16n8k16 does
// from the same accumulator, for any N (bench/probe_wgmma_bits.cu, bf16 included), so a row's bits
// are those of the other tiles: what differs is the data movement.
//
// A block computes 128 weight rows x kN tokens (32, 64 or 128: the fewest that hold the launch's
// rows). One producer warp feeds a ring of stages by TMA: per 64 columns the weight rows' box and
// the tokens' three part planes' boxes (rows of 128 bytes, landing in the 128-byte swizzle that
// the wgmma descriptors read; the split scratch is read as three row-strided matrices, one per
// part). Two consumer warpgroups (64 weight rows each) issue a stage's 12 wgmma (4 steps x 3
// parts, A and B both from shared memory), wait, release the stage, and fold a slice's sums into
// their totals at its end.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/wgmma.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kConsumers = 256;             // two warpgroups
constexpr int kThreads = kConsumers + 128;  // and the producer warpgroup (one warp of it works)
using Regs = WsRegs<kThreads, 40, 232>;
constexpr int kRowsPerBlock = 128;          // weight rows: 64 per consumer warpgroup
constexpr int kCols = 64;                   // columns per stage: 128 bytes of bf16 per row
constexpr int kWBox = kRowsPerBlock * 128;  // bytes of the weights' box

// The token tile kN (the wgmma's N: 32, 64 or 128 tokens, by the launch's rows; not a numerics
// choice): a stage holds the weights' box, then the parts' boxes x1, x2, x3 of kN rows each; as
// many stages as about 192 KB hold.
template <int kN>
struct WgCfg {
  static constexpr int kXBox = kN * 128;
  static constexpr int kStageBytes = kWBox + 3 * kXBox;
  static constexpr int kStages = 196608 / kStageBytes;
  static constexpr int kSmem = kStages * kStageBytes + 2 * kStages * 8 + 1024;
};
// Weights above this many bytes walk the token tiles fastest (a row block's tiles run together and
// its weights come from HBM once); below, the row blocks (a token tile's parts stay in L2).
constexpr int64_t kTokensFastBytes = int64_t{32} << 20;

struct WgArgs {
  CUtensorMap wmap;     // W [n][k] bf16, boxes of 128 rows x 64 columns
  CUtensorMap xmap[3];  // part i's plane of the split rows [m][kp], boxes of kN rows x 64
  float* y;
  int64_t ldy, n, m, nsteps, per_slice;
  bool tokens_fast;
};

template <int kN>
__global__ void __launch_bounds__(kThreads, 1) Bf16TcWgKernel(const __grid_constant__ WgArgs a) {
  using C = WgCfg<kN>;
  constexpr int kStages = C::kStages, kStageBytes = C::kStageBytes;
  PdlTrigger();
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignSmem1024(smem_raw);
  auto w_at = [&](int s) { return smem + s * kStageBytes; };
  auto x_at = [&](int s, int part) { return smem + s * kStageBytes + kWBox + part * C::kXBox; };
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(full + s, 1);
      MbarInit(empty + s, kConsumers / 32);
    }
    FenceMbarInit();
  }
  __syncthreads();
  PdlWait();  // the split planes come from the pre-pass
  // The block's tile: weight rows from row0, tokens from tok0 (tokens_fast: token tiles on x).
  const int64_t row0 =
      static_cast<int64_t>(a.tokens_fast ? blockIdx.y : blockIdx.x) * kRowsPerBlock;
  const int64_t tok0 = static_cast<int64_t>(a.tokens_fast ? blockIdx.x : blockIdx.y) * kN;

  if (warp >= kConsumers / 32) {  // the producer warpgroup: its registers go to the consumers
    Regs::Producer();
    if (warp != kConsumers / 32) return;
    for (int64_t ks = 0; ks < a.nsteps; ++ks) {
      const int s = static_cast<int>(ks % kStages);
      RingWaitEmpty<kStages>(empty, static_cast<uint32_t>(ks));
      if (lane == 0) {
        const int32_t c0 = static_cast<int32_t>(ks * kCols);
        MbarArriveExpectTx(full + s, kStageBytes);
        TmaLoad2d(w_at(s), &a.wmap, c0, static_cast<int32_t>(row0), full + s);
        for (int i = 0; i < 3; ++i)
          TmaLoad2d(x_at(s, i), &a.xmap[i], c0, static_cast<int32_t>(tok0), full + s);
      }
      __syncwarp();
    }
    return;
  }

  Regs::Consumer();
  const int wg = warp / 4, g = lane / 4, t4 = lane % 4;
  float acc[kN / 2], total[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) total[i] = 0.0f;
  for (int64_t ks = 0; ks < a.nsteps; ++ks) {
    const int s = static_cast<int>(ks % kStages);
    RingWaitFull<kStages>(full, static_cast<uint32_t>(ks));
    const uint32_t wa = SmemAddr(w_at(s)) + wg * 64 * 128;  // the warpgroup's 64 rows
    const bool slice_start = ks % a.per_slice == 0;
    WgmmaFence();
#pragma unroll
    for (int q = 0; q < kCols / 16; ++q) {
#pragma unroll
      for (int part = 2; part >= 0; --part) {  // x3, x2, x1: the chains' order
        const uint32_t xb = SmemAddr(x_at(s, part));
        WgmmaSsBf16<kN>(acc, WgmmaDescSw128(wa + q * 32), WgmmaDescSw128(xb + q * 32),
                        !(slice_start && q == 0 && part == 2));
      }
    }
    WgmmaCommit();
    WgmmaWait<0>();
    WgmmaFenceOperand(acc);
    __syncwarp();
    if (lane == 0) MbarArrive(empty + s);  // the warp is done with the stage
    if ((ks + 1) % a.per_slice == 0) {     // a slice's chain ends: fold it in, in slice order
      const bool first = ks + 1 == a.per_slice;
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) total[i] = first ? acc[i] : total[i] + acc[i];
    }
  }
  // C fragment (n8 tile ni, register i): row 16 w + g + 8 (i / 2), token 8 ni + 2 t + i % 2.
  const int w = warp % 4;
#pragma unroll
  for (int ni = 0; ni < kN / 8; ++ni)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = row0 + wg * 64 + w * 16 + g + 8 * (i / 2);
      const int64_t tok = tok0 + ni * 8 + 2 * t4 + (i % 2);
      if (row < a.n && tok < a.m) a.y[tok * a.ldy + row] = total[4 * ni + i];
    }
}

// The launch of the kN-token tile (the maps' boxes encoded for kN rows).
template <int kN>
void Launch(WgArgs& a, const Bf16TcLinearParams& p, StreamHandle stream) {
  using C = WgCfg<kN>;
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(Bf16TcWgKernel<kN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    C::kSmem));
    return true;
  }();
  (void)attr_set;
  const unsigned row_blocks = static_cast<unsigned>((p.n + kRowsPerBlock - 1) / kRowsPerBlock);
  const unsigned token_tiles = static_cast<unsigned>((p.m + kN - 1) / kN);
  const dim3 grid = a.tokens_fast ? dim3(token_tiles, row_blocks) : dim3(row_blocks, token_tiles);
  LaunchKernel(Bf16TcWgKernel<kN>, grid, dim3(kThreads), C::kSmem, stream, a);
  CUDA_CHECK_LAUNCH();
}

std::atomic<int64_t> g_wg_launches{0};

}  // namespace

int64_t Bf16TcWgLaunches() { return g_wg_launches.load(); }

bool TryLaunchBf16TcWg(const Bf16TcLinearParams& p, int64_t kp, int slices, StreamHandle stream) {
  const int64_t nsteps = kp / kCols;
  if (p.m <= 0 || slices <= 0 || nsteps % slices != 0) return false;
  // The token tile: the fewest of 32, 64, 128 tokens that holds the rows, 128 past that.
  const int tokens = p.m <= 32 ? 32 : p.m <= 64 ? 64 : 128;
  if (p.m > int64_t{65535} * tokens || p.n > int64_t{65535} * kRowsPerBlock) return false;
  WgArgs a{};
  if (!EncodeTensorMap2d(&a.wmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.w, static_cast<uint64_t>(p.k),
                         static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.k) * 2, kCols,
                         kRowsPerBlock, CU_TENSOR_MAP_SWIZZLE_128B))
    return false;
  for (int i = 0; i < 3; ++i) {  // split[(r * 3 + i) * kp + c]: rows 3 kp apart
    if (!EncodeTensorMap2d(&a.xmap[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.split + i * kp,
                           static_cast<uint64_t>(kp), static_cast<uint64_t>(p.m),
                           static_cast<uint64_t>(3 * kp) * 2, kCols, static_cast<uint32_t>(tokens),
                           CU_TENSOR_MAP_SWIZZLE_128B))
      return false;
  }
  a.y = p.y;
  a.ldy = p.ldy;
  a.n = p.n;
  a.m = p.m;
  a.nsteps = nsteps;
  a.per_slice = nsteps / slices;
  a.tokens_fast = p.n * p.k * 2 > kTokensFastBytes;
  ++g_wg_launches;
  if (tokens == 32)
    Launch<32>(a, p, stream);
  else if (tokens == 64)
    Launch<64>(a, p, stream);
  else
    Launch<128>(a, p, stream);
  return true;
}

}  // namespace dsinfer::backend::cuda
