// The FP8 linear for many rows (prefill): a tiled GEMM on the tensor cores that computes every
// output element with exactly the fp32 operations of QLinearKernel (qlinear_sm90.cu), so a row's
// bits do not depend on which kernel ran it (batch invariance, prefill = decode).
//
// Per output element (weight row r, token j), QLinearKernel computes, for each k slice of kKs
// columns (a function of the format and the pair only) from a zeroed sum: per 64-column pair, r =
// four chained m16n8k16 f16 mma steps from zero over the pair's e4m3 values (exact in f16), then
// acc = fmaf(r, s_w * s_x, acc); and adds the slices' sums in slice order (the first slice's sum is
// taken as it is). This kernel runs the same steps: the same mma instruction with A = weights, B =
// activations and the same k grouping per step, the same fmaf per pair, a running total over the
// slices. Only the data movement differs: a block owns 128 weight rows and 128 (fused SwiGLU pair:
// 64) tokens and streams both through shared memory in a 4-stage cp.async pipeline, so weights are
// read once per token tile and activations once per 128 weight rows (QLinearKernel re-reads every
// activation row once per 16 weight rows: its design point is decode).
//
// Scope: dense FP8 weights (one, or the fused w1/w3 pair), activations pre-quantized (act_quant
// pre-pass: e4m3 values as f16, one scale per 128 columns), grouped input when each group spans
// whole 128-row blocks. Everything else takes QLinearKernel (LaunchQLinear decides). On from
// KernelOptions::qgemm_min_rows rows (`--qgemm-min-rows`, default 512; tests/gpu's qgemm variants
// check its bits from 17 and 128 rows; passed on an H200, 2026-12-02).
#include <cuda_fp8.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "backend/cuda/check.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

using namespace qcore;

constexpr int kWarpsM = 4, kWarpsN = 2, kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kStages = 4;
constexpr int kBM = 128;            // weight rows per block (one 128-row scale block)
constexpr int kRowTiles = kBM / 16;  // 16-row tiles per block
constexpr int kPairBytes = 1024;     // one row tile's 64-column pair (TileFp8ForMma)
constexpr int kXPitch = 144;         // bytes per token row of a pair in shared memory (128 + pad)

// kD 1: one weight, warps 4 (rows) x 2 (tokens), each 32 rows x 64 tokens (2 x 8 mma tiles);
// kD 2: the w1/w3 pair, each warp 32 rows x 32 tokens (twice the accumulators).
template <int kD>
struct GCfg {
  static constexpr int kWM = 2;                  // m16 tiles per warp
  static constexpr int kWN = kD == 1 ? 8 : 4;    // n8 tiles per warp
  static constexpr int kBN = kWarpsN * kWN * 8;  // tokens per block
  static constexpr int kP = QCfg<false, kD>::kP;  // pairs per slice (QLinearKernel's)
  static constexpr int kWBytes = kD * kRowTiles * kPairBytes;
  static constexpr int kXBytes = kBN * kXPitch;
  static constexpr int kStageBytes = kWBytes + kXBytes + kBN * 4;
  // The running totals over the finished slices: each thread's own floats (registers would spill).
  static constexpr int kTotals = kD * kWM * kWN * 4;
  static constexpr int kSmem = kStages * kStageBytes + kTotals * kThreads * 4;
};

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool ok) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool ok) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int kD>
__global__ void __launch_bounds__(kThreads, 1) QGemmKernel(QLinearArgs p) {
  using C = GCfg<kD>;
  constexpr int kWM = C::kWM, kWN = C::kWN, kBN = C::kBN, kP = C::kP;
  PdlTrigger();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t tiles_n = (p.n + 15) / 16, npairs = p.k / 64;
  const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
  const int64_t sblk = (row0 >> 7) * ((p.k + 127) >> 7);  // the row block's first scale

  // Stage s: [kD][kRowTiles][1024] weight pairs, [kBN][kXPitch] activation bytes, [kBN] scales.
  auto w_at = [&](int s) { return smem + s * C::kStageBytes; };
  auto x_at = [&](int s) { return smem + s * C::kStageBytes + C::kWBytes; };
  auto sx_at = [&](int s) {
    return reinterpret_cast<float*>(smem + s * C::kStageBytes + C::kWBytes + C::kXBytes);
  };
  auto load = [&](int s, int64_t kp) {
    // Weights: 16-byte chunks c of (d, row tile, pair); tiles past the matrix are zeros.
    uint8_t* ws = w_at(s);
    for (int c = threadIdx.x; c < kD * kRowTiles * (kPairBytes / 16); c += kThreads) {
      const int d = c / (kRowTiles * (kPairBytes / 16));
      const int rt = (c / (kPairBytes / 16)) % kRowTiles, off = (c % (kPairBytes / 16)) * 16;
      const int64_t grt = (row0 >> 4) + rt;
      const bool ok = grt < tiles_n;
      const uint8_t* src = static_cast<const uint8_t*>(p.w[d]) +
                           (ok ? (grt * npairs + kp) * kPairBytes + off : 0);
      CpAsync16(ws + (d * kRowTiles + rt) * kPairBytes + off, src, ok);
    }
    // Activations: 8 chunks of 16 bytes per token (the pair's 64 f16 values).
    uint8_t* xs = x_at(s);
    for (int c = threadIdx.x; c < kBN * 8; c += kThreads) {
      const int i = c / 8, off = (c % 8) * 16;
      const bool ok = tok0 + i < p.m;
      const uint16_t* src = p.xq + (ok ? (tok0 + i) * p.ldq + goff + kp * 64 : 0);
      CpAsync16(xs + i * kXPitch + off, reinterpret_cast<const uint8_t*>(src) + (ok ? off : 0), ok);
    }
    // The tokens' act_quant scales of the pair's 128-column block.
    float* ss = sx_at(s);
    for (int i = threadIdx.x; i < kBN; i += kThreads) {
      const bool ok = tok0 + i < p.m;
      CpAsync4(ss + i, p.xs + (ok ? (tok0 + i) * p.lds + (goff + kp * 64) / kQb : 0), ok);
    }
  };

  float acc[kD][kWM][kWN][4];
#pragma unroll
  for (int d = 0; d < kD; ++d)
#pragma unroll
    for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[d][mi][ni][i] = 0.0f;
  // total[j] of this thread at totals[j * kThreads + threadIdx.x], j = ((d * kWM + mi) * kWN + ni)
  // * 4 + i.
  float* totals = reinterpret_cast<float*>(smem + kStages * C::kStageBytes) + threadIdx.x;

  PdlWait();  // the activations (and the act_quant pre-pass) come from earlier kernels
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < npairs) load(s, s);
    CpAsyncCommit();
  }
  for (int64_t kp = 0; kp < npairs; ++kp) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // stage kp is in; every warp is done with stage kp - 1
    if (kp + kStages - 1 < npairs) load(static_cast<int>((kp + kStages - 1) % kStages), kp + kStages - 1);
    CpAsyncCommit();
    const int s = static_cast<int>(kp % kStages);
    const uint8_t* ws = w_at(s);
    const uint8_t* xs = x_at(s);
    const float* ss = sx_at(s);
    float sw[kD];
#pragma unroll
    for (int d = 0; d < kD; ++d) sw[d] = ScaleAt(p.s[d], p.scale_format, sblk + kp / 2);
    // The warp's A fragments as f16 (PairMma's FP8 conversion): m tile mi, step q.
    uint32_t af[kD][kWM][4][4];
#pragma unroll
    for (int d = 0; d < kD; ++d) {
#pragma unroll
      for (int mi = 0; mi < kWM; ++mi) {
        const uint8_t* tile = ws + (d * kRowTiles + wm * kWM + mi) * kPairBytes + lane * 16;
        const uint4 lo = *reinterpret_cast<const uint4*>(tile);
        const uint4 hi = *reinterpret_cast<const uint4*>(tile + 512);
        const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          af[d][mi][q][0] = E4m3x2ToF16x2(wl[q]);
          af[d][mi][q][1] = E4m3x2ToF16x2(wh[q]);
          af[d][mi][q][2] = E4m3x2ToF16x2(wl[q] >> 16);
          af[d][mi][q][3] = E4m3x2ToF16x2(wh[q] >> 16);
        }
      }
    }
#pragma unroll
    for (int ni = 0; ni < kWN; ++ni) {
      const int tl = (wn * kWN + ni) * 8;  // the n tile's first token in the block
      // B: token tl + g, the lane's 16 values [16t, 16t + 16) of the pair (PairMma's FP8 order).
      const uint8_t* xr = xs + (tl + g) * kXPitch + 32 * t;
      const uint4 v0 = *reinterpret_cast<const uint4*>(xr);
      const uint4 v1 = *reinterpret_cast<const uint4*>(xr + 16);
      const uint32_t b[4][2] = {{v0.x, v0.y}, {v0.z, v0.w}, {v1.x, v1.y}, {v1.z, v1.w}};
      const float sx0 = ss[tl + 2 * t], sx1 = ss[tl + 2 * t + 1];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
#pragma unroll
        for (int mi = 0; mi < kWM; ++mi) {
          float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int q = 0; q < 4; ++q) Hmma(af[d][mi][q], b[q][0], b[q][1], r);
          float* a = acc[d][mi][ni];
          a[0] = fmaf(r[0], sw[d] * sx0, a[0]);
          a[1] = fmaf(r[1], sw[d] * sx1, a[1]);
          a[2] = fmaf(r[2], sw[d] * sx0, a[2]);
          a[3] = fmaf(r[3], sw[d] * sx1, a[3]);
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
        const int64_t row = row0 + (wm * kWM + mi) * 16 + g + 8 * (i / 2);
        const int64_t tok = tok0 + (wn * kWN + ni) * 8 + 2 * t + (i % 2);
        if (row < p.n && tok < p.m) {
          const float v0 = totals[((mi * kWN + ni) * 4 + i) * kThreads];
          const float v1 = totals[(((kD - 1) * kWM + mi) * kWN + ni) * 4 * kThreads + i * kThreads];
          p.y[tok * p.ldy + row] = kD == 2 ? SwigluF(v0, v1, p.limit) : v0;
        }
      }
    }
  }
}

template <int kD>
void LaunchQGemm(const QLinearArgs& a, StreamHandle stream) {
  using C = GCfg<kD>;
  auto kernel = QGemmKernel<kD>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>((a.n + kBM - 1) / kBM),
                  static_cast<unsigned>((a.m + C::kBN - 1) / C::kBN));
  LaunchKernel(kernel, grid, dim3(kThreads), C::kSmem, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// Called by LaunchQLinear after its own checks (FP8 block 128, grouped input in 16-row groups with
// 128-column offsets, pre-quantized rows at least as wide as the input); these are the tiled
// kernel's own conditions on top.
bool QGemmSupports(const QLinearArgs& a, bool fp4, bool expert) {
  auto aligned16 = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (fp4 || expert || a.xq == nullptr || a.xs == nullptr) return false;
  if (a.k % 64 != 0 || a.m <= 0) return false;
  // A group must span whole 128-row blocks (the block's input columns are one group's), and start
  // on a 128-column act_quant block (its scale index).
  if (a.group_rows > 0 && (a.group_rows % kBM != 0 || a.group_stride % kQb != 0)) return false;
  // 16-byte cp.async sources: row pitch, activations and weights in whole 16-byte chunks.
  if (a.ldq % 8 != 0 || !aligned16(a.xq) || !aligned16(a.w[0])) return false;
  if (a.w[1] != nullptr && !aligned16(a.w[1])) return false;
  return a.m < (int64_t{65535} * GCfg<1>::kBN / 2);
}

namespace {
std::atomic<int64_t> g_launches{0};
}  // namespace

int64_t QGemmLaunches() { return g_launches.load(); }

void LaunchQGemm(const QLinearArgs& a, bool dual, StreamHandle stream) {
  ++g_launches;
  if (dual)
    LaunchQGemm<2>(a, stream);
  else
    LaunchQGemm<1>(a, stream);
}

}  // namespace dsinfer::backend::cuda
