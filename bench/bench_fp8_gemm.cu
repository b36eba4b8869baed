// Experiment (issue 27): the dense FP8 linear on Hopper's FP8 instructions, checked bit for bit
// against the CPU model of them (wgmma_fp8_model.h) and timed at prefill sizes, to tell what an
// FP8-instruction numerics mode would buy before any kernel of src/ changes.
//
// y[token, row] = sum over 128-column blocks b, in order, of fmaf(r_b, s_w * s_x, acc), r_b = four
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
// Reports per shape (flash-l8's dense FP8 linears at M tokens): us per launch (event-timed
// median), TFLOP/s and the ratio to the FP8 dense peak (1,979 TFLOP/s, H100 / H200 SXM), and the
// bitwise mismatches of a sample of elements against the model (the model's own check:
// probe_fp8_mma_bits, fact 5). Today's kernel on the same shapes: bench_qgemm --tokens M.
//   bench_fp8_gemm [--tokens 8192] [--only NAME] [--sample 4096] [--reps 20]
// Exit 0 if every sampled element matches the model, 1 if not, 2 without an sm_90 device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/wgmma.cuh"
#include "backend/quant_codec.h"
#include "probe_bits.h"

namespace {

namespace cu = dsinfer::backend::cuda;
namespace qc = dsinfer::backend::qc;
using probe::WgmmaFp8Model;

constexpr int kThreads = 256, kBM = 128, kBN = 128, kBK = 128, kStages = 4;
constexpr int kWPitch = 144;               // bytes per staged weight row (conflict-free A loads)
constexpr int kXBytes = kBN * kBK;         // [4 steps][2 halves][128 tokens][16 bytes]
constexpr int kWBytes = kBM * kWPitch;     // [128 rows][144 bytes]
constexpr int kSxOff = kXBytes + kWBytes;  // the tokens' scales of the block, then s_w
constexpr int kStageBytes = (kSxOff + kBN * 4 + 16 + 1023) / 1024 * 1024;
constexpr int kSmem = kStages * kStageBytes;
constexpr double kFp8PeakTflops = 1979.0;

// wgmma m64n128k32 .e4m3, A from registers, B (K-major, no swizzle) through its descriptor;
// scale_d 0: D = A B. d[4j + 0..3]: n8 tile j's fragment of the warp's rows (rows g, g + 8).
#define F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define F16(i) F4(i), F4(i + 4), F4(i + 8), F4(i + 12)
__device__ __forceinline__ void WgmmaFp8N128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : F16(0), F16(16), F16(32), F16(48)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
#undef F16
#undef F4

// x: [m, k] e4m3 (act_quant's codes), xs: [m, k / 128] scales; w: [n, k] e4m3, ws: [n / 128,
// k / 128] block scales; y: [m, n]. n a multiple of 128, k of 128.
__global__ void __launch_bounds__(kThreads, 1)
    Fp8GemmKernel(const uint8_t* __restrict__ x, const float* __restrict__ xs,
                  const uint8_t* __restrict__ w, const float* __restrict__ ws,
                  float* __restrict__ y, int m, int n, int k) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kBM, tok0 = blockIdx.y * kBN, nblk = k / kBK;
  auto stage = [&](int s) { return smem + s * kStageBytes; };
  auto load = [&](int s, int kb) {
    uint8_t* st = stage(s);
    for (int c = threadIdx.x; c < kBN * 8; c += kThreads) {  // token i's 16-byte chunk ch
      const int i = c / 8, ch = c % 8;
      const bool ok = tok0 + i < m;
      cu::CpAsync16(st + (ch / 2) * (kBN * 32) + (ch % 2) * (kBN * 16) + i * 16,
                    ok ? x + static_cast<int64_t>(tok0 + i) * k + kb * kBK + ch * 16 : x, ok);
    }
    for (int c = threadIdx.x; c < kBM * 8; c += kThreads) {  // weight row r's chunk ch
      const int r = c / 8, ch = c % 8;
      cu::CpAsync16(st + kXBytes + r * kWPitch + ch * 16,
                    w + static_cast<int64_t>(row0 + r) * k + kb * kBK + ch * 16, true);
    }
    float* sx = reinterpret_cast<float*>(st + kSxOff);
    if (threadIdx.x < kBN) {
      const bool ok = tok0 + threadIdx.x < m;
      cu::CpAsync4(sx + threadIdx.x,
                   ok ? xs + static_cast<int64_t>(tok0 + threadIdx.x) * nblk + kb : xs, ok);
    } else if (threadIdx.x == kBN) {
      cu::CpAsync4(sx + kBN, ws + static_cast<int64_t>(row0 / kBM) * nblk + kb, true);
    }
  };
  // The warp's rows of the block: r0 (A rows g) and r0 + 8.
  const int r0 = (warp / 4) * 64 + (warp % 4) * 16 + g;
  float acc[64], r[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = r[i] = 0.0f;
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
    const uint8_t* wr = st + kXBytes;
    uint32_t af[4][4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int k0 = 32 * s + 4 * t;
      af[s][0] = *reinterpret_cast<const uint32_t*>(wr + r0 * kWPitch + k0);
      af[s][1] = *reinterpret_cast<const uint32_t*>(wr + (r0 + 8) * kWPitch + k0);
      af[s][2] = *reinterpret_cast<const uint32_t*>(wr + r0 * kWPitch + k0 + 16);
      af[s][3] = *reinterpret_cast<const uint32_t*>(wr + (r0 + 8) * kWPitch + k0 + 16);
    }
    const uint32_t xa = cu::SmemAddr(st);
    cu::WgmmaFence();
#pragma unroll
    for (int s = 0; s < 4; ++s) WgmmaFp8N128(r, af[s], cu::WgmmaDescB<kBN>(xa + s * kBN * 32), s);
    cu::WgmmaCommit();
    cu::WgmmaWait<0>();
    cu::WgmmaFenceOperand(r);
    const float* sx = reinterpret_cast<const float*>(st + kSxOff);
    const float sw = sx[kBN];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float s0 = sw * sx[8 * j + 2 * t], s1 = sw * sx[8 * j + 2 * t + 1];
      acc[4 * j] = fmaf(r[4 * j], s0, acc[4 * j]);
      acc[4 * j + 1] = fmaf(r[4 * j + 1], s1, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(r[4 * j + 2], s0, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(r[4 * j + 3], s1, acc[4 * j + 3]);
    }
  }
  cu::CpAsyncWait<0>();
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = tok0 + 8 * j + 2 * t + e % 2, row = row0 + r0 + 8 * (e / 2);
      if (tok < m) y[static_cast<int64_t>(tok) * n + row] = acc[4 * j + e];
    }
  }
}

struct Shape {
  const char* name;
  int n, k;
};

// Quantized operands as the model holds them: codes and, per element, its block's scale index.
struct Operand {
  std::vector<uint8_t> code;
  std::vector<float> scale;  // x: [m][k / 128]; w: [n / 128][k / 128]
};

Operand QuantizeActivations(int m, int k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Operand o;
  o.code.resize(static_cast<size_t>(m) * k);
  o.scale.resize(static_cast<size_t>(m) * (k / 128));
  std::vector<float> row(k);
  for (int i = 0; i < m; ++i) {
    for (float& v : row) v = normal(rng);
    for (int b = 0; b < k / 128; ++b) {
      float amax = 0.0f;
      for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(row[b * 128 + c]));
      const float s = qc::ScaleOfByte(qc::Kind::kFp8Pow2, qc::ScaleByte(qc::Kind::kFp8Pow2, amax));
      o.scale[static_cast<size_t>(i) * (k / 128) + b] = s;
      for (int c = 0; c < 128; ++c)
        o.code[static_cast<size_t>(i) * k + b * 128 + c] =
            qc::Code(qc::Kind::kFp8Pow2, row[b * 128 + c], s);
    }
  }
  return o;
}

Operand QuantizeWeights(int n, int k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = normal(rng);
  Operand o;
  o.code.resize(w.size());
  o.scale.resize(static_cast<size_t>(n / 128) * (k / 128));
  for (int rb = 0; rb < n / 128; ++rb) {
    for (int cb = 0; cb < k / 128; ++cb) {
      float amax = 0.0f;
      for (int r = 0; r < 128; ++r)
        for (int c = 0; c < 128; ++c)
          amax = std::max(amax, std::fabs(w[static_cast<size_t>(rb * 128 + r) * k + cb * 128 + c]));
      const float s = qc::ScaleOfByte(qc::Kind::kFp8Pow2, qc::ScaleByte(qc::Kind::kFp8Pow2, amax));
      o.scale[static_cast<size_t>(rb) * (k / 128) + cb] = s;
      for (int r = 0; r < 128; ++r)
        for (int c = 0; c < 128; ++c) {
          const size_t i = static_cast<size_t>(rb * 128 + r) * k + cb * 128 + c;
          o.code[i] = qc::Code(qc::Kind::kFp8Pow2, w[i], s);
        }
    }
  }
  return o;
}

// The model's y[i, j] (the kernel's operations on the CPU).
float ModelElement(const Operand& x, const Operand& w, int k, int i, int j) {
  const WgmmaFp8Model model;
  const int nblk = k / 128;
  float acc = 0.0f;
  for (int b = 0; b < nblk; ++b) {
    const float r = model.Chain(&x.code[static_cast<size_t>(i) * k + b * 128],
                                &w.code[static_cast<size_t>(j) * k + b * 128], 128);
    const float s = w.scale[static_cast<size_t>(j / 128) * nblk + b] *
                    x.scale[static_cast<size_t>(i) * nblk + b];
    acc = std::fmaf(r, s, acc);
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  int m = 8192, sample = 4096, reps = 20;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokens" && has_value) {
      m = std::atoi(argv[++i]);
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--sample" && has_value) {
      sample = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "bench_fp8_gemm: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (m < 1 || sample < 0 || reps < 1) {
    std::fprintf(stderr, "bench_fp8_gemm: --tokens and --reps positive, --sample >= 0\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
    std::fprintf(stderr, "bench_fp8_gemm: needs an sm_90 device\n");
    return 2;
  }
  PROBE_CUDA_CHECK(
      cudaFuncSetAttribute(Fp8GemmKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const Shape shapes[] = {{"wq_a", 1024, 4096},     {"wq_b", 32768, 1024},
                          {"wkv", 512, 4096},       {"idx_wq_b", 8192, 1024},
                          {"wo_b", 4096, 8192},     {"shared_w13", 4096, 4096},
                          {"shared_w2", 4096, 2048}};
  std::printf("{\"bench\": \"fp8_gemm_setup\", \"device\": \"%s\", \"tokens\": %d, \"smem\": %d}\n",
              prop.name, m, kSmem);
  bool all_ok = true;
  std::mt19937 rng(20261205u);
  for (const Shape& sh : shapes) {
    if (!only.empty() && only != sh.name) continue;
    const Operand x = QuantizeActivations(m, sh.k, rng), w = QuantizeWeights(sh.n, sh.k, rng);
    uint8_t *dx = probe::ToDevice(x.code), *dw = probe::ToDevice(w.code);
    float *dxs = probe::ToDevice(x.scale), *dws = probe::ToDevice(w.scale);
    float* dy = probe::DeviceFloats(static_cast<size_t>(m) * sh.n);
    const dim3 grid(sh.n / kBM, (m + kBN - 1) / kBN);
    auto launch = [&] {
      Fp8GemmKernel<<<grid, kThreads, kSmem>>>(dx, dxs, dw, dws, dy, m, sh.n, sh.k);
    };
    launch();
    PROBE_CUDA_CHECK(cudaGetLastError());
    PROBE_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    PROBE_CUDA_CHECK(cudaEventCreate(&e0));
    PROBE_CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> us;
    for (int rep = 0; rep < reps; ++rep) {
      PROBE_CUDA_CHECK(cudaEventRecord(e0));
      launch();
      PROBE_CUDA_CHECK(cudaEventRecord(e1));
      PROBE_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0.0f;
      PROBE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us.push_back(ms * 1000.0f);
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    const std::vector<float> y = probe::FromDevice(dy, static_cast<size_t>(m) * sh.n);
    // A sample of elements against the model, over the host's threads.
    std::vector<std::pair<int, int>> picks(sample);
    for (auto& p : picks) p = {static_cast<int>(rng() % m), static_cast<int>(rng() % sh.n)};
    std::vector<float> want(sample);
    const int workers = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (int wk = 0; wk < workers; ++wk)
      pool.emplace_back([&, wk] {
        for (int s = wk; s < sample; s += workers)
          want[s] = ModelElement(x, w, sh.k, picks[s].first, picks[s].second);
      });
    for (std::thread& th : pool) th.join();
    int64_t mismatches = 0;
    for (int s = 0; s < sample; ++s) {
      const float got = y[static_cast<size_t>(picks[s].first) * sh.n + picks[s].second];
      if (probe::FloatToBits(got) != probe::FloatToBits(want[s]) && mismatches++ < 3)
        std::printf("  %s: token %d row %d: %a vs model %a\n", sh.name, picks[s].first,
                    picks[s].second, got, want[s]);
    }
    all_ok &= mismatches == 0;
    const double tflops = 2.0 * m * sh.n * static_cast<double>(sh.k) / (med * 1e-6) / 1e12;
    std::printf(
        "{\"bench\": \"fp8_gemm\", \"shape\": \"%s\", \"tokens\": %d, \"n\": %d, \"k\": %d, "
        "\"us\": %.1f, \"tflops\": %.1f, \"ratio_to_fp8_peak\": %.2f, \"sampled\": %d, "
        "\"model_mismatches\": %lld}\n",
        sh.name, m, sh.n, sh.k, med, tflops, kFp8PeakTflops / tflops, sample,
        static_cast<long long>(mismatches));
    std::fflush(stdout);
    PROBE_CUDA_CHECK(cudaEventDestroy(e0));
    PROBE_CUDA_CHECK(cudaEventDestroy(e1));
    for (void* ptr : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(dxs),
                      static_cast<void*>(dws)})
      PROBE_CUDA_CHECK(cudaFree(ptr));
  }
  return all_ok ? 0 : 1;
}
