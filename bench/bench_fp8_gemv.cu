// Experiment (issue 27): the FP8-instruction linear at decode sizes (1..8 tokens), the other half
// of an FP8-instruction numerics mode (bench_fp8_gemm.cu is the prefill half): the same chains,
// so a row's bits are the same at every batch size, checked bit for bit against the CPU model
// (backend/wgmma_fp8.h) and timed against the weights' bytes.
//
// Numerics (fp8_operands.h's ModelElement): k cut into slices of 512 columns (FP8) or 256 (FP4),
// as today's decode kernels cut it (QCfg); per slice, per 128-column block, FP8: four wgmma
// m64n8k32 .e4m3 steps chained from zero, acc = fmaf(r, s_w * s_x, acc); FP4: per 32-column group
// one step from zero, acc = fmaf(r, s_g * s_x, acc); the slices' sums added in slice order.
//
// The kernel: a block = one warpgroup = 64 weight rows x one slice; the tokens (up to 8) are the
// wgmma's N (their slice staged in shared memory by cp.async as WgmmaDescB<8> reads it), the
// weights its A straight from global memory into registers: the host tiles them in fragment
// order ([64-row group][k32 step][thread][16 bytes]: a0..a3 of the lane; FP4: two steps' 8 bytes
// each, four nibble quads), so a warp's load is 512 contiguous bytes and a slice's loads all go out
// before the first instruction. A second kernel adds the slices' partials in order.
//
// Reports per shape and token count: us per launch (both kernels; CUDA-graph replay, as bench_qgemm
// times), the weight bytes' GB/s, and the bitwise mismatches of every output against the model.
// Today's decode kernels on the same matrices: bench_qgemm --prequant --tokens M (its weight_gbps).
// A host check first (also alone:
// --host-check) reads the tiled weights and the staged tokens back through wgmma's operand layouts.
//   bench_fp8_gemv [--tokens 1,8] [--only NAME] [--host-check]
// Exit 0 if every output matches the model, 1 if not, 2 without an sm_90 device.
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
#include "backend/cuda/wgmma.cuh"
#include "fp8_operands.h"
#include "gpu_bench.h"  // MedianGraphUs
#include "probe_bits.h"

namespace {

namespace cu = dsinfer::backend::cuda;
namespace qc = dsinfer::backend::qc;
using cu::fp8mma::E2m1x4ToE4m3;
using cu::fp8mma::SliceCols;
using cu::fp8mma::WgmmaFp8N8;
using fp8bench::ModelElement;
using fp8bench::Operand;

// Launches per timed CUDA graph (bench_qgemm's count: the same measure as its figures).
constexpr int kGraphLaunches = 5;
constexpr int kThreads = 128, kRows = 64, kMaxTokens = 8;

// The tiled weights: FP8 [n / 64][k / 32][128 threads][16 bytes] (the thread's a0..a3 of step s);
// FP4 [n / 64][k / 64][128 threads][16 bytes] (bytes 0..7 step 2j, 8..15 step 2j + 1: the four
// nibble quads of a0..a3, the lowest k in the lowest nibble). Register q of thread (warp w, lane
// (g, t)) holds row 16 w + g + 8 (q % 2), k 32 s + 4 t + 16 (q / 2) + 0..3. FP4 group scales: the
// ue8m0 bytes [n / 64][k / 32][64 rows].
struct Tiled {
  std::vector<uint8_t> w, sg;
};
Tiled TileWeights(const Operand& w, int n, int k, bool fp4) {
  Tiled t;
  const int steps = k / 32;
  t.w.resize(static_cast<size_t>(n) * k / (fp4 ? 2 : 1));
  if (fp4) t.sg.resize(static_cast<size_t>(n) * steps);
  for (int rg = 0; rg < n / kRows; ++rg)
    for (int s = 0; s < steps; ++s)
      for (int th = 0; th < kThreads; ++th)
        for (int q = 0; q < 4; ++q) {
          const int wp = th / 32, g = (th % 32) / 4, tq = th % 4;
          const int row = rg * kRows + 16 * wp + g + 8 * (q % 2),
                    k0 = 32 * s + 4 * tq + 16 * (q / 2);
          if (fp4) {
            // e2m1 codes back from the e4m3 ones (the values are e2m1 values times 1).
            uint16_t quad = 0;
            for (int b = 0; b < 4; ++b) {
              const uint8_t e = w.e4m3[static_cast<size_t>(row) * k + k0 + b];
              const float v = qc::E4m3ToFloat(e);
              quad |= static_cast<uint16_t>(qc::E2m1Code(v) << (4 * b));
            }
            const size_t off =
                ((static_cast<size_t>(rg) * (steps / 2) + s / 2) * kThreads + th) * 16 +
                (s % 2) * 8 + q * 2;
            std::memcpy(&t.w[off], &quad, 2);
          } else {
            const size_t off = ((static_cast<size_t>(rg) * steps + s) * kThreads + th) * 16 + q * 4;
            std::memcpy(&t.w[off], &w.e4m3[static_cast<size_t>(row) * k + k0], 4);
          }
        }
  if (fp4) {
    for (int rg = 0; rg < n / kRows; ++rg)
      for (int s = 0; s < steps; ++s)
        for (int r = 0; r < kRows; ++r) {
          t.sg[(static_cast<size_t>(rg) * steps + s) * kRows + r] =
              qc::Pow2ScaleByte(w.Scale(rg * kRows + r, 32 * s));
        }
  }
  return t;
}

// Token i's 16-byte chunk ch of the slice in the staged B: [k32 step][2 k halves][8 tokens][16].
__host__ __device__ __forceinline__ int BStageOff(int i, int ch) {
  return (ch / 2) * (kMaxTokens * 32) + (ch % 2) * (kMaxTokens * 16) + i * 16;
}

// x: [m, k] e4m3, xs: [m, k / 128]; w tiled; ws: FP8 [n / 128, k / 128] block scales, FP4 the
// tiled ue8m0 group scales; part: [slices][m][n] (one slice: y itself).
template <bool kFp4>
__global__ void __launch_bounds__(kThreads)
    Fp8GemvKernel(const uint8_t* __restrict__ x, const float* __restrict__ xs,
                  const uint8_t* __restrict__ w, const float* __restrict__ ws,
                  const uint8_t* __restrict__ sg, float* __restrict__ part, int m, int n, int k) {
  constexpr int kSlice = SliceCols(kFp4), kSteps = kSlice / 32;
  __shared__ __align__(128) uint8_t sb[kSteps * kMaxTokens * 32];
  __shared__ float sxs[kMaxTokens][kSlice / 128];
  const int rg = blockIdx.x, slice = blockIdx.y, steps = k / 32, nblk = k / 128;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The slice's A fragments, all in flight at once.
  uint4 wv[kFp4 ? kSteps / 2 : kSteps];
  const uint4* wsrc = reinterpret_cast<const uint4*>(w) +
                      (static_cast<int64_t>(rg) * (kFp4 ? steps / 2 : steps) +
                       slice * (kFp4 ? kSteps / 2 : kSteps)) *
                          kThreads +
                      threadIdx.x;
#pragma unroll
  for (int i = 0; i < (kFp4 ? kSteps / 2 : kSteps); ++i) wv[i] = __ldg(wsrc + i * kThreads);
  // The tokens' slice (zeros past m) and their scales.
  for (int c = threadIdx.x; c < kMaxTokens * (kSlice / 16); c += kThreads) {
    const int i = c / (kSlice / 16), ch = c % (kSlice / 16);
    const bool ok = i < m;
    cu::CpAsync16(sb + BStageOff(i, ch),
                  ok ? x + static_cast<int64_t>(i) * k + slice * kSlice + ch * 16 : x, ok);
  }
  cu::CpAsyncCommit();
  if (threadIdx.x < kMaxTokens * (kSlice / 128)) {
    const int i = threadIdx.x / (kSlice / 128), b = threadIdx.x % (kSlice / 128);
    sxs[i][b] = i < m ? xs[static_cast<int64_t>(i) * nblk + slice * (kSlice / 128) + b] : 0.0f;
  }
  cu::CpAsyncWait<0>();
  cu::FenceProxyAsync();
  __syncthreads();
  const uint32_t sba = cu::SmemAddr(sb);
  const int r0 = 16 * warp + g;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto promote = [&](int b, float s_lo, float s_hi) {  // tokens 2t, 2t + 1; rows r0, r0 + 8
    const float x0 = sxs[2 * t][b], x1 = sxs[2 * t + 1][b];
    acc[0] = fmaf(r[0], s_lo * x0, acc[0]);
    acc[1] = fmaf(r[1], s_lo * x1, acc[1]);
    acc[2] = fmaf(r[2], s_hi * x0, acc[2]);
    acc[3] = fmaf(r[3], s_hi * x1, acc[3]);
  };
#pragma unroll
  for (int b = 0; b < kSlice / 128; ++b) {
    if constexpr (kFp4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int s = 4 * b + j;  // the slice's step (the block's group j)
        const uint4 v = wv[s / 2];
        const uint32_t lo = s % 2 == 0 ? v.x : v.z, hi = s % 2 == 0 ? v.y : v.w;
        const uint32_t af[4] = {E2m1x4ToE4m3(lo & 0xffffu), E2m1x4ToE4m3(lo >> 16),
                                E2m1x4ToE4m3(hi & 0xffffu), E2m1x4ToE4m3(hi >> 16)};
        cu::WgmmaFence();
        WgmmaFp8N8(r, af, cu::WgmmaDescB<kMaxTokens>(sba + s * kMaxTokens * 32), 0);
        cu::WgmmaCommit();
        cu::WgmmaWait<0>();
        cu::WgmmaFenceOperand(r);
        const int gs = slice * kSteps + s;  // the group's global step
        const uint8_t* sgs = sg + (static_cast<int64_t>(rg) * steps + gs) * kRows;
        promote(b, qc::Pow2OfByte(sgs[r0]), qc::Pow2OfByte(sgs[r0 + 8]));
      }
    } else {
      cu::WgmmaFence();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 v = wv[4 * b + j];
        const uint32_t af[4] = {v.x, v.y, v.z, v.w};
        WgmmaFp8N8(r, af, cu::WgmmaDescB<kMaxTokens>(sba + (4 * b + j) * kMaxTokens * 32), j);
      }
      cu::WgmmaCommit();
      cu::WgmmaWait<0>();
      cu::WgmmaFenceOperand(r);
      const float sw = ws[static_cast<int64_t>(rg / 2) * nblk + slice * (kSlice / 128) + b];
      promote(b, sw, sw);
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int tok = 2 * t + e % 2, row = rg * kRows + r0 + 8 * (e / 2);
    if (tok < m) part[(static_cast<int64_t>(slice) * m + tok) * n + row] = acc[e];
  }
}

// y[i, j] = part[0] + part[1] + ... in slice order.
__global__ void SliceSumKernel(const float* __restrict__ part, float* __restrict__ y, int slices,
                               int64_t mn) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= mn) return;
  float total = part[e];
  for (int s = 1; s < slices; ++s) total += part[s * mn + e];
  y[e] = total;
}

struct Shape {
  const char* name;
  int n, k;
  bool fp4;
};

// The host check: the tiled A fragments (as the kernel converts them) and the staged B, read
// back through the e4m3 A-fragment layout and WgmmaDescB<8>'s geometry, must be the codes.
bool HostCheck() {
  std::mt19937 rng(38);
  bool ok = true;
  for (bool fp4 : {false, true}) {
    const int n = 128, k = 512;
    const Operand w = fp8bench::QuantizeWeights(n, k, fp4, rng);
    const Tiled tl = TileWeights(w, n, k, fp4);
    const int steps = k / 32;
    int bad = 0;
    for (int rg = 0; rg < n / kRows; ++rg)
      for (int s = 0; s < steps; ++s)
        for (int th = 0; th < kThreads; ++th) {
          uint32_t af[4];
          if (fp4) {
            uint32_t half[2];
            std::memcpy(
                half,
                &tl.w[((static_cast<size_t>(rg) * (steps / 2) + s / 2) * kThreads + th) * 16 +
                      (s % 2) * 8],
                8);
            af[0] = E2m1x4ToE4m3(half[0] & 0xffffu);
            af[1] = E2m1x4ToE4m3(half[0] >> 16);
            af[2] = E2m1x4ToE4m3(half[1] & 0xffffu);
            af[3] = E2m1x4ToE4m3(half[1] >> 16);
          } else {
            std::memcpy(af, &tl.w[((static_cast<size_t>(rg) * steps + s) * kThreads + th) * 16],
                        16);
          }
          for (int q = 0; q < 4; ++q)
            for (int b = 0; b < 4; ++b) {
              const int wp = th / 32, g = (th % 32) / 4, t = th % 4;
              const int row = rg * kRows + 16 * wp + g + 8 * (q % 2);
              const int kk = 32 * s + 4 * t + 16 * (q / 2) + b;
              bad += static_cast<uint8_t>(af[q] >> (8 * b)) !=
                     w.e4m3[static_cast<size_t>(row) * k + kk];
            }
        }
    if (bad != 0) std::printf("host check (%s): %d A codes wrong\n", fp4 ? "fp4" : "fp8", bad);
    ok &= bad == 0;
  }
  // B: token i's k of step s at s * 8 * 32 + (k / 16) * 8 * 16 + i * 16 + k % 16.
  std::vector<uint8_t> xs(kMaxTokens * 512), sb(16 * kMaxTokens * 32);
  for (auto& v : xs) v = static_cast<uint8_t>(rng() & 0x7eu);
  for (int i = 0; i < kMaxTokens; ++i)
    for (int ch = 0; ch < 32; ++ch) std::memcpy(&sb[BStageOff(i, ch)], &xs[i * 512 + ch * 16], 16);
  int bad_b = 0;
  for (int s = 0; s < 16; ++s)
    for (int i = 0; i < kMaxTokens; ++i)
      for (int kk = 0; kk < 32; ++kk)
        bad_b += sb[s * kMaxTokens * 32 + (kk / 16) * kMaxTokens * 16 + i * 16 + kk % 16] !=
                 xs[i * 512 + 32 * s + kk];
  if (bad_b != 0) std::printf("host check: %d B codes misplaced\n", bad_b);
  return ok && bad_b == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> token_counts = {1, 8};
  bool host_only = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokens" && has_value) {
      token_counts.clear();
      for (int64_t v : dsinfer::bench::ParseIntList(argv[++i]))
        token_counts.push_back(static_cast<int>(v));
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--host-check") {
      host_only = true;
    } else {
      std::fprintf(stderr, "bench_fp8_gemv: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  bool args_ok = !token_counts.empty();
  for (int m : token_counts) args_ok = args_ok && m >= 1 && m <= kMaxTokens;
  if (!args_ok) {
    std::fprintf(stderr, "bench_fp8_gemv: --tokens in [1, 8]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (const int rc = probe::StartAfterHostCheck("fp8_gemv", HostCheck(), host_only, &prop); rc >= 0)
    return rc;
  const Shape shapes[] = {{"wq_a", 1024, 4096, false},       {"wq_b", 32768, 1024, false},
                          {"wkv", 512, 4096, false},         {"wo_b", 4096, 8192, false},
                          {"shared_w13", 4096, 4096, false}, {"shared_w2", 4096, 2048, false},
                          {"expert_w13", 4096, 4096, true},  {"expert_w2", 4096, 2048, true}};
  std::printf("{\"bench\": \"fp8_gemv_setup\", \"device\": \"%s\"}\n", prop.name);
  bool all_ok = true;
  std::mt19937 rng(20261205u);
  cu::Stream st;
  for (const Shape& sh : shapes) {
    if (!only.empty() && only != sh.name) continue;
    const Operand w = fp8bench::QuantizeWeights(sh.n, sh.k, sh.fp4, rng);
    const Tiled tl = TileWeights(w, sh.n, sh.k, sh.fp4);
    uint8_t* dw = probe::ToDevice(tl.w);
    uint8_t* dsg = sh.fp4 ? probe::ToDevice(tl.sg) : nullptr;
    float* dws = sh.fp4 ? nullptr : probe::ToDevice(w.scale);
    // Bytes a launch reads of the weights: codes and scales.
    const double wbytes = static_cast<double>(tl.w.size()) +
                          (sh.fp4 ? static_cast<double>(tl.sg.size()) : 4.0 * w.scale.size());
    const int slices = sh.k / SliceCols(sh.fp4);
    for (int m : token_counts) {
      const Operand x = fp8bench::QuantizeActivations(m, sh.k, rng);
      uint8_t* dx = probe::ToDevice(x.code);
      float* dxs = probe::ToDevice(x.scale);
      float* dy = probe::DeviceFloats(static_cast<size_t>(m) * sh.n);
      float* dpart = slices > 1 ? probe::DeviceFloats(static_cast<size_t>(slices) * m * sh.n) : dy;
      const dim3 grid(sh.n / kRows, slices);
      auto launch = [&](int) {
        if (sh.fp4) {
          Fp8GemvKernel<true>
              <<<grid, kThreads, 0, st.get()>>>(dx, dxs, dw, dws, dsg, dpart, m, sh.n, sh.k);
        } else {
          Fp8GemvKernel<false>
              <<<grid, kThreads, 0, st.get()>>>(dx, dxs, dw, dws, dsg, dpart, m, sh.n, sh.k);
        }
        if (slices > 1) {
          const int64_t mn = static_cast<int64_t>(m) * sh.n;
          SliceSumKernel<<<static_cast<unsigned>((mn + 255) / 256), 256, 0, st.get()>>>(dpart, dy,
                                                                                        slices, mn);
        }
      };
      launch(0);
      PROBE_CUDA_CHECK(cudaGetLastError());
      st.Synchronize();
      const double med = dsinfer::bench::MedianGraphUs(launch, kGraphLaunches, st.get());
      const std::vector<float> y = probe::FromDevice(dy, static_cast<size_t>(m) * sh.n);
      // Every output against the model, over the host's threads.
      std::vector<float> want(y.size());
      fp8bench::ParallelFor(static_cast<int64_t>(want.size()), [&](int64_t e) {
        want[e] = ModelElement(x, w, static_cast<int>(e / sh.n), static_cast<int>(e % sh.n));
      });
      const int64_t mismatches = probe::TallyMismatches(y, want, false, 3, [&](size_t e) {
                                   std::printf("  %s m=%d: token %zu row %zu: %a vs model %a\n",
                                               sh.name, m, e / sh.n, e % sh.n, y[e], want[e]);
                                 }).mismatches;
      all_ok &= mismatches == 0;
      std::printf(
          "{\"bench\": \"fp8_gemv\", \"shape\": \"%s\", \"format\": \"%s\", \"tokens\": %d, "
          "\"n\": %d, \"k\": %d, \"slices\": %d, \"us\": %.2f, \"weight_gbps\": %.0f, "
          "\"outputs\": %zu, \"model_mismatches\": %lld}\n",
          sh.name, sh.fp4 ? "fp4" : "fp8", m, sh.n, sh.k, slices, med, wbytes / (med * 1e-6) / 1e9,
          y.size(), static_cast<long long>(mismatches));
      std::fflush(stdout);
      if (slices > 1) PROBE_CUDA_CHECK(cudaFree(dpart));
      PROBE_CUDA_CHECK(cudaFree(dx));
      PROBE_CUDA_CHECK(cudaFree(dxs));
    }
    PROBE_CUDA_CHECK(cudaFree(dw));
    if (dsg != nullptr) PROBE_CUDA_CHECK(cudaFree(dsg));
    if (dws != nullptr) PROBE_CUDA_CHECK(cudaFree(dws));
  }
  return all_ok ? 0 : 1;
}
