// Probe: what do Hopper's FP8 tensor-core instructions compute, against the f16 steps the FP8 /
// FP4 linears use today?
//
// Why: the FP8 / FP4 linears (qlinear_core.cuh, qgemm_wg_sm90.cu) convert e4m3 / e2m1 operands
// exactly to f16 and run mma.sync m16n8k16 (or wgmma m64nNk16) chains: per FP8 64-column pair
// four k16 steps from zero, per FP4 32-column group two. The FP8 instructions (mma.sync
// m16n8k32 .e4m3, wgmma m64nNk32 .e4m3) take the bytes as they are — no conversion — at twice the
// f16 rate. Whether a kernel may switch depends on three facts this probe measures:
//   1. fp8_vs_f16: does one k32 FP8 step (S chained steps) give the bits of the two (2S) chained
//      f16 k16 steps on the same values? If so, the switch keeps every bit, decode and prefill.
//   2. fp8_vs_exact / f16_vs_exact: how often each differs from the exact sum rounded once to
//      fp32, and by how many ulps (the FP8 path's accumulation precision; DeepSeek-V3's report
//      says about 14 bits on H800 for long chains).
//   3. wgmma_vs_mma: does wgmma m64n8k32 .e4m3 (A from registers, B from shared memory) give the
//      bits of mma.sync m16n8k32 .e4m3 per step (the decode and the tiled kernels sharing bits)?
//   4. wgmma_n256_vs_n8: does a column of wgmma m64n256k32 .e4m3 (4 chained steps, k 128: one
//      act_quant block) get the bits of the same column under m64n8k32 (its n8 group alone)? A
//      batch-invariant kernel on wgmma's FP8 steps needs that: decode runs narrow tiles, prefill
//      wide ones. Also per class: wgmma's k128 chain against the exact sum, as the largest error
//      relative to the sum of the products' magnitudes (the precision an FP8-instruction numerics
//      mode would trade, with its partial sums promoted to fp32 every 128 k as DeepGEMM does).
//   5. wgmma_vs_model: does backend/wgmma_fp8.h (session 38: fitted to the 27 elements this
//      probe printed in session 31) give wgmma's bits for every element, at N = 8 and (fact 4's
//      launches) N = 256? Also how many elements its variants give (the leading-one cut, a
//      subnormal's exponent, 12 and 14 fraction bits): what the data tell apart. If the model
//      holds, a CPU reference can adopt the FP8 instructions' rounding exactly.
// Classes: exact (small integers as e4m3: every sum exact; checks the fragment and descriptor
// layouts by value: exit 1 if any path differs), fp8xe4m3 (random e4m3 codes, NaN excluded, both
// operands), fp4xe4m3 (A e2m1 values as e4m3, B random e4m3: the FP4 experts' products), and
// fp8_block (e4m3 codes of act_quant-like blocks: the largest magnitude of each row near 448).
// C is zero; S = 1, 2, 4 chained steps, N = 8 (one n group: the descriptor's leading and stride
// byte offsets are both 128 there, so a wider N is needed to check that they are not swapped; a
// k permutation common to A and B no dot product can see).
// Output: one JSON line per class, steps and comparison (elements, mismatches, max ulp), up to 3
// example mismatches before it; then one line per class for fact 4 (count / 8 problems of 256
// columns). Exit 0 when the exact class matches on every path, 1 if not, 2
// without an sm_90 device.
//   build-cuda/bin/probe_fp8_mma_bits [--problems N]   (default 2000)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/wgmma.cuh"
#include "fp8_operands.h"  // ParallelFor
#include "probe_bits.h"

namespace {

using namespace probe;
using dsinfer::backend::cuda::FenceProxyAsync;
using dsinfer::backend::cuda::WgmmaCommit;
using dsinfer::backend::cuda::WgmmaDescB;
using dsinfer::backend::cuda::WgmmaFence;
using dsinfer::backend::cuda::WgmmaWait;
using dsinfer::backend::cuda::fp8mma::WgmmaFp8N256;
using dsinfer::backend::cuda::fp8mma::WgmmaFp8N8;

constexpr int kM = 64, kN = 8, kThreads = 128;

// ---------------------------------------------------------------------------------------------
// Device side. Fragments (g = lane / 4, t = lane % 4): m16n8k32 .e4m3 A a0 / a1 rows g / g + 8,
// k 4t .. 4t + 3 (the lowest k in the lowest byte), a2 / a3 the same rows, k 16 + 4t ..; B b0 k
// 4t .. 4t + 3 of column g, b1 k 16 + 4t ..; C / D as m16n8k16's (d0 / d1 row g, columns 2t /
// 2t + 1; d2 / d3 row g + 8).

__device__ __forceinline__ void MmaFp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t Bytes4(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
__device__ __forceinline__ uint32_t Pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// B's columns (bt: column n's kK codes contiguous) into shared memory as the no-swizzle K-major
// descriptors read them: per k32 step [2 k halves][cols n][16 k], each thread a stride of them.
__device__ __forceinline__ void StageB(const uint8_t* pb, int cols, int kK, uint8_t* sb) {
  for (int i = threadIdx.x; i < cols * kK; i += blockDim.x) {
    const int n = i / kK, k = i % kK, s = k / 32, kh = (k % 32) / 16;
    sb[s * cols * 32 + kh * cols * 16 + n * 16 + k % 16] = pb[i];
  }
}
// The lane's A fragment of k32 step s (rows r0 = 16 w + g and r1 = r0 + 8 of pa, row-major with kK
// codes a row; t = lane % 4).
__device__ __forceinline__ void AFragment(const uint8_t* pa, int kK, int s, int r0, int r1, int t,
                                          uint32_t (&af)[4]) {
  const int k0 = 32 * s + 4 * t;
  af[0] = Bytes4(pa + r0 * kK + k0);
  af[1] = Bytes4(pa + r1 * kK + k0);
  af[2] = Bytes4(pa + r0 * kK + k0 + 16);
  af[3] = Bytes4(pa + r1 * kK + k0 + 16);
}

// One warpgroup per problem p: a (64 x 32S e4m3, row-major), bt (8 x 32S: column n's k
// contiguous), and their exact f16 copies ah / bth -> d_fp8 (mma.sync k32 chain), d_f16
// (mma.sync k16 chain, 2S steps), d_wg (wgmma k32 chain), each 64 x 8, all from zero.
template <int kSteps>
__global__ void __launch_bounds__(kThreads, 1)
    ProbeKernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ bt,
                const uint16_t* __restrict__ ah, const uint16_t* __restrict__ bth,
                float* __restrict__ d_fp8, float* __restrict__ d_f16, float* __restrict__ d_wg) {
  constexpr int kK = 32 * kSteps;
  __shared__ __align__(1024) uint8_t sb[kSteps * kN * 32];  // per step [2 k halves][8 n][16 k]
  const int p = blockIdx.x, tid = threadIdx.x;
  const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const uint8_t* pa = a + static_cast<size_t>(p) * kM * kK;
  const uint8_t* pb = bt + static_cast<size_t>(p) * kN * kK;
  const uint16_t* pah = ah + static_cast<size_t>(p) * kM * kK;
  const uint16_t* pbh = bth + static_cast<size_t>(p) * kN * kK;
  StageB(pb, kN, kK, sb);
  FenceProxyAsync();
  __syncthreads();
  const int r0 = 16 * w + g, r1 = r0 + 8;
  float d8[4] = {0, 0, 0, 0}, d16[4] = {0, 0, 0, 0}, dw[4] = {0, 0, 0, 0};
  uint32_t af[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int k0 = 32 * s + 4 * t;
    AFragment(pa, kK, s, r0, r1, t, af[s]);
    MmaFp8(d8, af[s], Bytes4(pb + g * kK + k0), Bytes4(pb + g * kK + k0 + 16));
  }
#pragma unroll
  for (int s = 0; s < 2 * kSteps; ++s) {
    const int k0 = 16 * s + 2 * t;
    const uint32_t a16[4] = {Pack(pah[r0 * kK + k0], pah[r0 * kK + k0 + 1]),
                             Pack(pah[r1 * kK + k0], pah[r1 * kK + k0 + 1]),
                             Pack(pah[r0 * kK + k0 + 8], pah[r0 * kK + k0 + 9]),
                             Pack(pah[r1 * kK + k0 + 8], pah[r1 * kK + k0 + 9])};
    dsinfer::backend::cuda::qcore::Hmma(a16, Pack(pbh[g * kK + k0], pbh[g * kK + k0 + 1]),
                                        Pack(pbh[g * kK + k0 + 8], pbh[g * kK + k0 + 9]), d16);
  }
  const uint32_t sb_addr = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  WgmmaFence();
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
    WgmmaFp8N8(dw, af[s], WgmmaDescB<kN>(sb_addr + s * kN * 32), s > 0);
  WgmmaCommit();
  WgmmaWait<0>();
  const size_t base = static_cast<size_t>(p) * kM * kN;
  const int idx[4] = {r0 * kN + 2 * t, r0 * kN + 2 * t + 1, r1 * kN + 2 * t, r1 * kN + 2 * t + 1};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    d_fp8[base + idx[e]] = d8[e];
    d_f16[base + idx[e]] = d16[e];
    d_wg[base + idx[e]] = dw[e];
  }
}

// B's descriptor (K-major, no swizzle) for a layout [2 k halves][rows][16 bytes] of `rows` n
// rows: the k halves `rows` * 16 bytes apart (leading byte offset), the n groups of 8 rows 128
// bytes apart (stride byte offset). smem_addr: the first row wanted (an n8 group: + 128 g).
__device__ __forceinline__ uint64_t DescBRows(uint32_t smem_addr, uint32_t rows) {
  const uint32_t lbo = rows * 16, sbo = 128;
  return static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3fffu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3fffu) << 32);
}

constexpr int kWideN = 256, kWideSteps = 4;  // k 128: one act_quant block

// One warpgroup per problem p: a (64 x 128 e4m3, row-major), bt (256 x 128: column n's k
// contiguous) -> d_wide (the m64n256k32 chain) and d_narrow (each n8 group's m64n8k32 chain over
// the same shared-memory rows), both 64 x 256.
__global__ void __launch_bounds__(kThreads, 1)
    WideKernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ bt,
               float* __restrict__ d_wide, float* __restrict__ d_narrow) {
  constexpr int kK = 32 * kWideSteps, kStepBytes = kWideN * 32;
  __shared__ __align__(1024) uint8_t sb[kWideSteps * kStepBytes];  // per step [2][256 n][16 k]
  const int p = blockIdx.x, tid = threadIdx.x;
  const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const uint8_t* pa = a + static_cast<size_t>(p) * kM * kK;
  const uint8_t* pb = bt + static_cast<size_t>(p) * kWideN * kK;
  StageB(pb, kWideN, kK, sb);
  FenceProxyAsync();
  __syncthreads();
  const int r0 = 16 * w + g, r1 = r0 + 8;
  uint32_t af[kWideSteps][4];
#pragma unroll
  for (int st = 0; st < kWideSteps; ++st) AFragment(pa, kK, st, r0, r1, t, af[st]);
  const uint32_t sb_addr = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  const size_t base = static_cast<size_t>(p) * kM * kWideN;
  auto store = [&](float* out, int j, const float* d4) {  // n8 tile j's fragment
    const int c = 8 * j + 2 * t;
    out[base + r0 * kWideN + c] = d4[0];
    out[base + r0 * kWideN + c + 1] = d4[1];
    out[base + r1 * kWideN + c] = d4[2];
    out[base + r1 * kWideN + c + 1] = d4[3];
  };
  {
    float dw[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) dw[i] = 0.0f;
    WgmmaFence();
#pragma unroll
    for (int st = 0; st < kWideSteps; ++st)
      WgmmaFp8N256(dw, af[st], DescBRows(sb_addr + st * kStepBytes, kWideN), st > 0);
    WgmmaCommit();
    WgmmaWait<0>();
#pragma unroll
    for (int j = 0; j < kWideN / 8; ++j) store(d_wide, j, dw + 4 * j);
  }
  for (int j = 0; j < kWideN / 8; ++j) {
    float dn[4] = {0, 0, 0, 0};
    WgmmaFence();
#pragma unroll
    for (int st = 0; st < kWideSteps; ++st)
      WgmmaFp8N8(dn, af[st], DescBRows(sb_addr + st * kStepBytes + 128 * j, kWideN), st > 0);
    WgmmaCommit();
    WgmmaWait<0>();
    store(d_narrow, j, dn);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

enum class Cls { kExact, kFp8, kFp4, kFp8Block };

struct ClassSpec {
  const char* name;
  Cls cls;
};

struct Problems {
  int count = 0, steps = 0, n = kN;
  std::vector<uint8_t> a, bt;  // count x 64 x 32S, count x n x 32S (e4m3)
  int K() const { return 32 * steps; }
  double A(int p, int m, int k) const {
    return DecodeE4m3(a[(static_cast<size_t>(p) * kM + m) * K() + k]);
  }
  double B(int p, int k, int n) const {
    return DecodeE4m3(bt[(static_cast<size_t>(p) * this->n + n) * K() + k]);
  }
  double Dot(int p, int m, int n) const {  // exact: e4m3 products and their sum fit a double
    double s = 0.0;
    for (int k = 0; k < K(); ++k) s += A(p, m, k) * B(p, k, n);
    return s;
  }
};

// The e4m3 code of an exactly representable value (aborts otherwise).
uint8_t EncodeE4m3(double v) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    if (DecodeE4m3(static_cast<uint8_t>(b)) == v && std::signbit(DecodeE4m3(b)) == std::signbit(v))
      return static_cast<uint8_t>(b);
  }
  std::fprintf(stderr, "EncodeE4m3: %.17g is not an e4m3 value\n", v);
  std::exit(2);
}

Problems Generate(const ClassSpec& cs, int steps, int count, uint32_t seed, int n = kN) {
  std::mt19937 rng(seed);
  Problems pr;
  pr.count = count;
  pr.steps = steps;
  pr.n = n;
  const int kk = pr.K();
  pr.a.resize(static_cast<size_t>(count) * kM * kk);
  pr.bt.resize(static_cast<size_t>(count) * n * kk);
  uint8_t small_codes[9], e2m1_codes[16];  // e4m3 codes of -4 .. 4 and of the e2m1 values
  for (int v = 0; v < 9; ++v) small_codes[v] = EncodeE4m3(static_cast<double>(v - 4));
  for (int c = 0; c < 16; ++c) e2m1_codes[c] = EncodeE4m3(DecodeE2m1(static_cast<uint8_t>(c)));
  auto small = [&]() { return small_codes[rng() % 9u]; };
  // act_quant-like: a row's codes of values x / s with the row's max near 448 (codes of random
  // magnitudes up to 2^-6 below it, so the block spreads over a few binades).
  auto block_code = [&]() {
    for (;;) {
      const uint32_t sign = rng() & 1u, e = 9u + rng() % 7u, m = rng() % 8u;  // 2^-6 .. 2^8 x 1.m
      const auto b = static_cast<uint8_t>((sign << 7) | (e << 3) | m);
      if ((b & 0x7f) != 0x7f) return b;  // (0x7f / 0xff: NaN)
    }
  };
  // One operand code of the class (A and B alike except FP4's A: e2m1 values as e4m3), A's codes
  // drawn first.
  auto draw = [&](bool a_side) -> uint8_t {
    switch (cs.cls) {
      case Cls::kExact:
        return small();
      case Cls::kFp8:
        return RandomE4m3Bits(rng);
      case Cls::kFp4:
        return a_side ? e2m1_codes[rng() & 15u] : RandomE4m3Bits(rng);
      case Cls::kFp8Block:
        return block_code();
    }
    return 0;
  };
  for (auto& x : pr.a) x = draw(true);
  for (auto& x : pr.bt) x = draw(false);
  return pr;
}

struct Outputs {
  std::vector<float> fp8, f16, wg;
};

template <int kSteps>
Outputs RunKernel(const Problems& pr) {
  const size_t out_n = static_cast<size_t>(pr.count) * kM * kN;
  std::vector<uint16_t> ah(pr.a.size()), bth(pr.bt.size());
  for (size_t i = 0; i < ah.size(); ++i) ah[i] = EncodeF16(DecodeE4m3(pr.a[i]));
  for (size_t i = 0; i < bth.size(); ++i) bth[i] = EncodeF16(DecodeE4m3(pr.bt[i]));
  uint8_t *da = ToDevice(pr.a), *db = ToDevice(pr.bt);
  uint16_t *dah = ToDevice(ah), *dbh = ToDevice(bth);
  float *d8 = DeviceFloats(out_n), *d16 = DeviceFloats(out_n), *dw = DeviceFloats(out_n);
  ProbeKernel<kSteps><<<pr.count, kThreads>>>(da, db, dah, dbh, d8, d16, dw);
  PROBE_CUDA_CHECK(cudaGetLastError());
  PROBE_CUDA_CHECK(cudaDeviceSynchronize());
  Outputs o{FromDevice(d8, out_n), FromDevice(d16, out_n), FromDevice(dw, out_n)};
  for (void* ptr : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dah),
                    static_cast<void*>(dbh)}) {
    PROBE_CUDA_CHECK(cudaFree(ptr));
  }
  return o;
}

Outputs Dispatch(const Problems& pr) {
  if (pr.steps == 1) return RunKernel<1>(pr);
  if (pr.steps == 2) return RunKernel<2>(pr);
  if (pr.steps == 4) return RunKernel<4>(pr);
  std::fprintf(stderr, "no kernel for %d steps\n", pr.steps);
  std::exit(2);
}

// got vs want element by element, by bits or (against the exact sums) by value; the first `show`
// mismatches printed.
int64_t Compare(const ClassSpec& cs, const Problems& pr, const char* compare,
                const std::vector<float>& got, const std::vector<float>& want, bool by_value,
                int show = 3) {
  const Tally tl = TallyMismatches(got, want, by_value, show, [&](size_t i) {
    const int p = static_cast<int>(i / (kM * kN)), m = static_cast<int>(i / kN % kM),
              n = static_cast<int>(i % kN);
    std::printf("  %s k32x%d %s: problem %d row %d col %d: %a vs %a, %lld ulp; exact %.17g\n",
                cs.name, pr.steps, compare, p, m, n, got[i], want[i],
                static_cast<long long>(UlpDistance(got[i], want[i])), pr.Dot(p, m, n));
  });
  std::printf(
      "{\"probe\": \"fp8_mma_bits\", \"class\": \"%s\", \"variant\": \"m64n8k32x%d\", "
      "\"compare\": \"%s\", \"n\": %d, \"elements\": %zu, \"mismatches\": %lld, \"max_ulp\": "
      "%lld}\n",
      cs.name, pr.steps, compare, pr.count, got.size(), static_cast<long long>(tl.mismatches),
      static_cast<long long>(tl.max_ulp));
  std::fflush(stdout);
  return tl.mismatches;
}

// The model's output for every element of a problem set (index (p * 64 + m) * n + col, as the
// kernels write them), problems spread over the host's threads.
std::vector<float> ModelOutputs(const Problems& pr, const WgmmaFp8Model& model) {
  const int kk = pr.K();
  std::vector<float> out(static_cast<size_t>(pr.count) * kM * pr.n);
  fp8bench::ParallelFor(pr.count, [&](int64_t p) {
    for (int m = 0; m < kM; ++m)
      for (int n = 0; n < pr.n; ++n)
        out[(static_cast<size_t>(p) * kM + m) * pr.n + n] =
            model.Chain(&pr.a[(static_cast<size_t>(p) * kM + m) * kk],
                        &pr.bt[(static_cast<size_t>(p) * pr.n + n) * kk], kk);
  });
  return out;
}

// Bitwise mismatches of got against the model's outputs.
int64_t ModelMismatches(const Problems& pr, const WgmmaFp8Model& model,
                        const std::vector<float>& got) {
  return TallyMismatches(got, ModelOutputs(pr, model), false, 0, [](size_t) {}).mismatches;
}

// Fact 5's variants: how many of wgmma's elements each model variant misses.
void ReportModelVariants(const ClassSpec& cs, const Problems& pr, const std::vector<float>& wg) {
  WgmmaFp8Model own, sub, f12, f14;
  own.cut_at_own_lead = true;
  sub.subnormal_true_exponent = true;
  f12.fraction_bits = 12;
  f14.fraction_bits = 14;
  std::printf(
      "{\"probe\": \"fp8_mma_bits\", \"class\": \"%s\", \"variant\": \"m64n%dk32x%d\", "
      "\"compare\": \"wgmma_vs_model_variants\", \"elements\": %zu, \"own_lead\": %lld, "
      "\"subnormal_true_exponent\": %lld, \"fraction_bits_12\": %lld, \"fraction_bits_14\": "
      "%lld}\n",
      cs.name, pr.n, pr.steps, wg.size(), static_cast<long long>(ModelMismatches(pr, own, wg)),
      static_cast<long long>(ModelMismatches(pr, sub, wg)),
      static_cast<long long>(ModelMismatches(pr, f12, wg)),
      static_cast<long long>(ModelMismatches(pr, f14, wg)));
  std::fflush(stdout);
}

// Fact 4 for one class: count problems of 256 columns; true when the exact class's sums are
// exact on both paths (the wide and narrow descriptors' layouts), for the others always.
bool WideVsNarrow(const ClassSpec& cs, int count, uint32_t seed) {
  const Problems pr = Generate(cs, kWideSteps, count, seed, kWideN);
  const size_t out_n = static_cast<size_t>(count) * kM * kWideN;
  uint8_t *da = ToDevice(pr.a), *db = ToDevice(pr.bt);
  float *dwide = DeviceFloats(out_n), *dnarrow = DeviceFloats(out_n);
  WideKernel<<<count, kThreads>>>(da, db, dwide, dnarrow);
  PROBE_CUDA_CHECK(cudaGetLastError());
  PROBE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> wide = FromDevice(dwide, out_n), narrow = FromDevice(dnarrow, out_n);
  PROBE_CUDA_CHECK(cudaFree(da));
  PROBE_CUDA_CHECK(cudaFree(db));
  // The operands decoded once (the exact sums below take 2 x 64 x 256 x 128 products a problem).
  std::vector<double> av(pr.a.size()), bv(pr.bt.size());
  for (size_t i = 0; i < av.size(); ++i) av[i] = DecodeE4m3(pr.a[i]);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = DecodeE4m3(pr.bt[i]);
  const int kk = pr.K();
  int64_t differ = 0, wide_inexact = 0, narrow_inexact = 0;
  double max_rel = 0.0;
  for (size_t i = 0; i < out_n; ++i) {
    const int p = static_cast<int>(i / (kM * kWideN)), m = static_cast<int>(i / kWideN % kM),
              n = static_cast<int>(i % kWideN);
    if (FloatToBits(wide[i]) != FloatToBits(narrow[i]) && differ++ < 3) {
      std::printf("  %s n256_vs_n8: problem %d row %d col %d: %a vs %a\n", cs.name, p, m, n,
                  wide[i], narrow[i]);
    }
    const double* ar = av.data() + (static_cast<size_t>(p) * kM + m) * kk;
    const double* bc = bv.data() + (static_cast<size_t>(p) * kWideN + n) * kk;
    double exact = 0.0, mag = 0.0;  // exact: e4m3 products and their sum fit a double
    for (int k = 0; k < kk; ++k) {
      exact += ar[k] * bc[k];
      mag += std::fabs(ar[k] * bc[k]);
    }
    wide_inexact += static_cast<double>(wide[i]) != static_cast<double>(static_cast<float>(exact));
    narrow_inexact +=
        static_cast<double>(narrow[i]) != static_cast<double>(static_cast<float>(exact));
    if (mag > 0.0) max_rel = std::max(max_rel, std::fabs(wide[i] - exact) / mag);
  }
  std::printf(
      "{\"probe\": \"fp8_mma_bits\", \"class\": \"%s\", \"variant\": \"m64n256k32x4\", "
      "\"compare\": \"wgmma_n256_vs_n8\", \"n\": %d, \"elements\": %zu, \"mismatches\": %lld, "
      "\"n256_not_exact\": %lld, \"n8_not_exact\": %lld, \"max_err_over_abs_sum\": %.3g, "
      "\"n256_vs_model\": %lld}\n",
      cs.name, count, out_n, static_cast<long long>(differ), static_cast<long long>(wide_inexact),
      static_cast<long long>(narrow_inexact), max_rel,
      static_cast<long long>(ModelMismatches(pr, WgmmaFp8Model{}, wide)));
  std::fflush(stdout);
  return cs.cls != Cls::kExact || (wide_inexact == 0 && narrow_inexact == 0);
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  cudaDeviceProp prop{};
  if (!ProbeSetup(argc, argv, "probe_fp8_mma_bits", &count, &prop)) return 2;
  std::printf("# probe_fp8_mma_bits on %s, %d problems per class and steps\n", prop.name, count);
  const ClassSpec classes[] = {{"exact", Cls::kExact},
                               {"fp8xe4m3", Cls::kFp8},
                               {"fp4xe4m3", Cls::kFp4},
                               {"fp8_block", Cls::kFp8Block}};
  bool exact_ok = true;
  uint32_t seed = 20261204u;
  for (const ClassSpec& cs : classes) {
    for (const int steps : {1, 2, 4}) {
      const Problems pr = Generate(cs, steps, count, seed++);
      const Outputs o = Dispatch(pr);
      std::vector<float> exact(o.fp8.size());
      for (size_t i = 0; i < exact.size(); ++i) {
        const int p = static_cast<int>(i / (kM * kN)), m = static_cast<int>(i / kN % kM),
                  n = static_cast<int>(i % kN);
        exact[i] = static_cast<float>(pr.Dot(p, m, n));
      }
      const int64_t f8 = Compare(cs, pr, "fp8_vs_exact", o.fp8, exact, true);
      const int64_t f16 = Compare(cs, pr, "f16_vs_exact", o.f16, exact, true);
      const int64_t wg = Compare(cs, pr, "wgmma_vs_exact", o.wg, exact, true);
      Compare(cs, pr, "fp8_vs_f16", o.fp8, o.f16, false);
      Compare(cs, pr, "wgmma_vs_mma", o.wg, o.fp8, false);
      // (More examples of the model's misses, if any: each names regenerable operands to refit on.)
      Compare(cs, pr, "wgmma_vs_model", o.wg, ModelOutputs(pr, WgmmaFp8Model{}), false, 16);
      ReportModelVariants(cs, pr, o.wg);
      if (cs.cls == Cls::kExact) exact_ok &= f8 == 0 && f16 == 0 && wg == 0;
    }
  }
  for (const ClassSpec& cs : classes) exact_ok &= WideVsNarrow(cs, std::max(1, count / 8), seed++);
  std::printf("# exact class (layouts): %s\n", exact_ok ? "pass" : "FAIL");
  return exact_ok ? 0 : 1;
}
