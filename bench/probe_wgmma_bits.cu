// Probe: does Hopper's warpgroup MMA (wgmma.mma_async m64nNk16 .f32.f16.f16 / .f32.bf16.bf16, A
// from registers, B from shared memory) give, per k16 step, the same fp32 bits as the warp MMA
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (and .bf16) on the same operands and the same
// fp32 accumulator input?
//
// Why: the FP8 / FP4 GEMM's bits (qgemm_sm90.cu, top comment; QLinearKernel's) are defined by
// chains of mma.sync m16n8k16 steps: per 64-column FP8 pair four chained k16 steps from a zero
// accumulator, per 32-column FP4 scale group two, each chain's result then taken by fp32 fmaf with
// the scales. A wgmma kernel can reproduce those bits only if wgmma rounds each k16 step (and each
// chained step onto its own result) exactly as mma.sync does.
//
// What runs: per operand class, 2000 random problems D = A (64 x 16S) * B (16S x N) + C (64 x N),
// one launch, one warpgroup per problem, S chained k16 steps (S = 1, 2, 4), N = 8, 32, 64, 128.
// Each problem is computed three ways: mma.sync (warp w: rows 16w..16w+15, one m16n8k16 per n8 tile
// and step, chained on its own accumulator from C); wgmma from C (scale-d = 1 every step, the steps
// issued back to back onto one accumulator); wgmma with scale-d = 0 on the first step (D = A * B,
// C ignored); for N a multiple of 64, by ProbeTransKernel, wgmma from C with B N-major in the
// 128-byte swizzle (imm-trans-b, WgmmaDescMnSw128: the attention row block's P V). The A
// fragments are the same registers for both (wgmma's A register fragment of warp
// w is mma.sync's m16k16 fragment of rows 16w..); B is read by mma.sync from global memory and by
// wgmma from shared memory through a matrix descriptor (no swizzle, K-major, canonical core
// matrices: 8 n x 16 bytes of k each, 128 contiguous bytes; LBO = the byte step between the two k
// halves' core matrices, SBO = the step between n8 groups).
// Classes: exact (small integers, every result exact: checks the fragment and descriptor layouts
// against a host double sum, by value, f16 and bf16); fp4xe4m3 (A e2m1 values, B e4m3 values, C
// zero); fp4s14xe4m3 (A = e2m1 * 2^-14, the f16 values QLinearKernel actually feeds the mma, f16
// subnormals included; B e4m3; C zero); fp8xe4m3 (A and B e4m3, C zero); random_f16 / random_bf16
// (sign, exponent in [-10, 10] and mantissa uniform; C per element zero, in 2^-20..2^20 like the
// products, in 2^21..2^40, or minus the first step's sum to within a few ulps).
//
// Output: one JSON line per class, type, variant (shape and steps) and comparison — "wgmma_vs_mma"
// (bits), "wgmma_t_vs_mma" (bits, N % 64 == 0: the N-major B), "wgmma_d0_vs_mma" (bits, zero-C
// classes: is scale-d = 0 the same as a zeroed
// accumulator?), and for the exact class "mma_vs_exact" / "wgmma_vs_exact" / "wgmma_d0_vs_exact"
// (values), and for the other classes at one step "mma_vs_double" (information only: how often
// the tensor cores do not give the double sum rounded to fp32, i.e. how much rounding the
// comparisons exercise) — with the mismatch count and the largest ulp distance, after up to 3
// example mismatches. Exit 0 when the exact class matches (the layouts are right) whatever the
// other results (findings, not failures); 1 when it does not; 2 without an sm_90 device.
// The wgmma side runs backend/cuda/wgmma.cuh's wrappers (Wgmma, WgmmaDescB, the fences): the
// ones the tiled GEMM's wgmma path calls.
//   build-cuda/bin/probe_wgmma_bits [--problems N]   (default 2000)
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

#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/wgmma.cuh"
#include "probe_bits.h"

namespace {

using namespace probe;
using dsinfer::backend::cuda::FenceProxyAsync;
using dsinfer::backend::cuda::Wgmma;
using dsinfer::backend::cuda::WgmmaCommit;
using dsinfer::backend::cuda::WgmmaDescB;
using dsinfer::backend::cuda::WgmmaDescMnSw128;
using dsinfer::backend::cuda::WgmmaFence;
using dsinfer::backend::cuda::WgmmaWait;

constexpr int kM = 64;         // wgmma rows (4 warps x 16)
constexpr int kThreads = 128;  // one warpgroup

// ---------------------------------------------------------------------------------------------
// Device side.

// d (16 x 8 fp32) += A (16 x 16, row) * B (16 x 8, col), mma.sync m16n8k16 as the kernels issue
// it (qcore::Hmma, MmaBf16): a0/a1 rows g/g+8 k 2t..2t+1, a2/a3 the same rows k 2t+8..; b0 k
// 2t..2t+1 of column g, b1 k 2t+8..; d0/d1 row g cols 2t/2t+1, d2/d3 row g+8 (g = lane / 4, t =
// lane % 4; low half of a register = the lower k).
template <bool kBf16>
__device__ __forceinline__ void MmaSync(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  if constexpr (kBf16) {
    dsinfer::backend::cuda::MmaBf16(a, b0, b1, d);
  } else {
    dsinfer::backend::cuda::qcore::Hmma(a, b0, b1, d);
  }
}

// B of one k16 step in shared memory, K-major, no swizzle: core matrix (k half kh, n group nb) =
// 8 n rows x 8 k (16 bytes) each, 128 contiguous bytes, at (kh * N / 8 + nb) * 128 bytes. So the
// leading byte offset (between the core matrices adjacent in K) is N * 16 bytes and the stride
// byte offset (between those adjacent in N) 128 bytes. Element index (2-byte units):
__host__ __device__ constexpr int SmemBIndex(int n_total, int n, int k) {
  return ((k / 8) * (n_total / 8) + n / 8) * 64 + (n % 8) * 8 + k % 8;
}

__device__ __forceinline__ uint32_t Pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Warp w's A fragments of rows 16 w .. + 15 for each k16 step (a: 64 x 16S, row-major).
template <int kSteps>
__device__ __forceinline__ void LoadA(const uint16_t* a, uint32_t (&af)[kSteps][4]) {
  constexpr int kK = 16 * kSteps;
  const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int r0 = 16 * w + g, r1 = r0 + 8;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int k0 = 16 * s + 2 * t;
    af[s][0] = Pack(a[r0 * kK + k0], a[r0 * kK + k0 + 1]);
    af[s][1] = Pack(a[r1 * kK + k0], a[r1 * kK + k0 + 1]);
    af[s][2] = Pack(a[r0 * kK + k0 + 8], a[r0 * kK + k0 + 9]);
    af[s][3] = Pack(a[r1 * kK + k0 + 8], a[r1 * kK + k0 + 9]);
  }
}

// The index in a 64 x kN row-major matrix of accumulator element 4 j + e of this thread (n8 tile
// j of its warp's 16 rows: mma.sync's C fragment).
template <int kN>
__device__ __forceinline__ int FragIndex(int j, int e) {
  const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  return (16 * w + g + 8 * (e / 2)) * kN + 8 * j + 2 * t + e % 2;
}

// One warpgroup per problem p: a (64 x 16S, row-major), bt (N x 16S: B column n's k contiguous),
// c (64 x N) -> d_mma, d_wg, d_wg0 (64 x N each).
template <bool kBf16, int kN, int kSteps>
__global__ void __launch_bounds__(kThreads, 1)
    ProbeKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ bt,
                const float* __restrict__ c, float* __restrict__ d_mma, float* __restrict__ d_wg,
                float* __restrict__ d_wg0) {
  constexpr int kK = 16 * kSteps;
  constexpr int kStepElems = kN * 16;
  constexpr int kFrag = kN / 2;
  __shared__ __align__(1024) uint16_t sb[kSteps * kStepElems];

  const int p = blockIdx.x, tid = threadIdx.x;
  const int lane = tid % 32, g = lane / 4, t = lane % 4;
  const uint16_t* pa = a + static_cast<size_t>(p) * kM * kK;
  const uint16_t* pb = bt + static_cast<size_t>(p) * kN * kK;
  const float* pc = c + static_cast<size_t>(p) * kM * kN;

  for (int i = tid; i < kN * kK; i += kThreads) {
    const int n = i / kK, k = i % kK;
    sb[(k / 16) * kStepElems + SmemBIndex(kN, n, k % 16)] = pb[i];
  }
  // The generic-proxy stores above must be visible to wgmma (async proxy) reads.
  FenceProxyAsync();
  __syncthreads();

  uint32_t af[kSteps][4];
  LoadA<kSteps>(pa, af);
  float cf[kFrag];
#pragma unroll
  for (int e = 0; e < kFrag; ++e) cf[e] = pc[FragIndex<kN>(e / 4, e % 4)];

  // (i) mma.sync: per n8 tile, the steps chained on the tile's accumulator from C.
  float dm[kFrag];
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    float acc[4] = {cf[4 * j], cf[4 * j + 1], cf[4 * j + 2], cf[4 * j + 3]};
    const int n = 8 * j + g;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int k0 = 16 * s + 2 * t;
      const uint32_t b0 = Pack(pb[n * kK + k0], pb[n * kK + k0 + 1]);
      const uint32_t b1 = Pack(pb[n * kK + k0 + 8], pb[n * kK + k0 + 9]);
      MmaSync<kBf16>(acc, af[s], b0, b1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) dm[4 * j + e] = acc[e];
  }

  const uint32_t sb_addr = static_cast<uint32_t>(__cvta_generic_to_shared(sb));
  // (ii) wgmma from C, scale-d = 1 on every step.
  float dw[kFrag];
#pragma unroll
  for (int e = 0; e < kFrag; ++e) dw[e] = cf[e];
  WgmmaFence();
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    Wgmma<kN, kBf16>(dw, af[s], WgmmaDescB<kN>(sb_addr + s * kStepElems * 2), 1);
  }
  WgmmaCommit();
  WgmmaWait<0>();
  // (iii) wgmma with scale-d = 0 on the first step (C not read).
  float dw0[kFrag];
#pragma unroll
  for (int e = 0; e < kFrag; ++e) dw0[e] = 0.0f;
  WgmmaFence();
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    Wgmma<kN, kBf16>(dw0, af[s], WgmmaDescB<kN>(sb_addr + s * kStepElems * 2), s > 0);
  }
  WgmmaCommit();
  WgmmaWait<0>();

  const size_t base = static_cast<size_t>(p) * kM * kN;
#pragma unroll
  for (int e = 0; e < kFrag; ++e) {
    const size_t i = base + FragIndex<kN>(e / 4, e % 4);
    d_mma[i] = dm[e];
    d_wg[i] = dw[e];
    d_wg0[i] = dw0[e];
  }
}

// B of one k16 step N-major with the 128-byte swizzle (WgmmaDescMnSw128): boxes of 64 n x 16 k
// rows (2,048 bytes; the leading byte offset), k row kk's 16-byte chunk j (n 8 j .. 8 j + 7) at
// byte kk * 128 + ((j ^ kk % 8) * 16) of its box. Element index (2-byte units):
__host__ __device__ constexpr int SmemBtIndex(int n, int kk) {
  return (n / 64) * 1024 + kk * 64 + ((((n % 64) / 8) ^ (kk % 8)) * 8) + n % 8;
}

// The same problems as ProbeKernel with B N-major in the 128-byte swizzle (imm-trans-b; N % 64 ==
// 0): wgmma from C, scale-d = 1 on every step -> d_wgt (64 x N).
template <bool kBf16, int kN, int kSteps>
__global__ void __launch_bounds__(kThreads, 1)
    ProbeTransKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ bt,
                     const float* __restrict__ c, float* __restrict__ d_wgt) {
  static_assert(kN % 64 == 0);
  constexpr int kK = 16 * kSteps;
  constexpr int kStepElems = kN * 16;
  constexpr int kFrag = kN / 2;
  __shared__ __align__(1024) uint16_t sbt[kSteps * kStepElems];
  const int p = blockIdx.x, tid = threadIdx.x;
  const uint16_t* pb = bt + static_cast<size_t>(p) * kN * kK;
  const float* pc = c + static_cast<size_t>(p) * kM * kN;
  for (int i = tid; i < kN * kK; i += kThreads) {
    const int n = i / kK, k = i % kK;
    sbt[(k / 16) * kStepElems + SmemBtIndex(n, k % 16)] = pb[i];
  }
  FenceProxyAsync();
  __syncthreads();
  uint32_t af[kSteps][4];
  LoadA<kSteps>(a + static_cast<size_t>(p) * kM * kK, af);
  float d[kFrag];
#pragma unroll
  for (int e = 0; e < kFrag; ++e) d[e] = pc[FragIndex<kN>(e / 4, e % 4)];
  const uint32_t sbt_addr = static_cast<uint32_t>(__cvta_generic_to_shared(sbt));
  WgmmaFence();
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    Wgmma<kN, kBf16, true>(d, af[s], WgmmaDescMnSw128(sbt_addr + s * kStepElems * 2, 16 * 128), 1);
  }
  WgmmaCommit();
  WgmmaWait<0>();
  const size_t base = static_cast<size_t>(p) * kM * kN;
#pragma unroll
  for (int e = 0; e < kFrag; ++e) d_wgt[base + FragIndex<kN>(e / 4, e % 4)] = d[e];
}

// ---------------------------------------------------------------------------------------------
// Host side.

enum class Cls { kExact, kFp4, kFp4S14, kFp8, kRandom };

struct ClassSpec {
  const char* name;
  Cls cls;
  bool bf16;
};

struct Variant {
  int n, steps;
};

struct Problems {
  int count = 0, n = 0, steps = 0;
  bool bf16 = false;
  std::vector<uint16_t> a, bt;  // count x 64 x 16S, count x N x 16S
  std::vector<float> c;         // count x 64 x N
  double Val(uint16_t h) const { return bf16 ? DecodeBf16(h) : DecodeF16(h); }
  int K() const { return 16 * steps; }
  double A(int p, int m, int k) const {
    return Val(a[(static_cast<size_t>(p) * kM + m) * K() + k]);
  }
  double B(int p, int k, int n_) const {
    return Val(bt[(static_cast<size_t>(p) * n + n_) * K() + k]);
  }
};

// The sum of a(m, k) * b(k, n) over k in [k0, k1) in double: exact for the exact class (its
// reference); otherwise close (the cancelling C of the random classes, the example summaries).
double DotRange(const Problems& pr, int p, int m, int n, int k0, int k1) {
  double s = 0.0;
  for (int k = k0; k < k1; ++k) s += pr.A(p, m, k) * pr.B(p, k, n);
  return s;
}

Problems Generate(const ClassSpec& cs, const Variant& v, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  Problems pr;
  pr.count = count;
  pr.n = v.n;
  pr.steps = v.steps;
  pr.bf16 = cs.bf16;
  const int k_total = pr.K();
  pr.a.resize(static_cast<size_t>(count) * kM * k_total);
  pr.bt.resize(static_cast<size_t>(count) * v.n * k_total);
  pr.c.assign(static_cast<size_t>(count) * kM * v.n, 0.0f);
  auto enc = [&](double x) { return cs.bf16 ? EncodeBf16(x) : EncodeF16(x); };
  auto small_int = [&](int lim) {
    return static_cast<int>(rng() % static_cast<uint32_t>(2 * lim + 1)) - lim;
  };
  auto random_bits = [&]() -> uint16_t {  // sign, exponent in [-10, 10], mantissa uniform
    const uint32_t sign = rng() & 1u, e = rng() % 21u;
    if (cs.bf16)
      return static_cast<uint16_t>((sign << 15) | ((e - 10 + 127) << 7) | (rng() & 127u));
    return static_cast<uint16_t>((sign << 15) | ((e - 10 + 15) << 10) | (rng() & 1023u));
  };
  auto operand = [&](bool is_a) -> uint16_t {
    switch (cs.cls) {
      case Cls::kExact:
        return enc(small_int(4));
      case Cls::kFp4:
        return is_a ? enc(DecodeE2m1(rng() & 15u)) : enc(DecodeE4m3(RandomE4m3Bits(rng)));
      case Cls::kFp4S14:
        return is_a ? enc(std::ldexp(DecodeE2m1(rng() & 15u), -14))
                    : enc(DecodeE4m3(RandomE4m3Bits(rng)));
      case Cls::kFp8:
        return enc(DecodeE4m3(RandomE4m3Bits(rng)));
      case Cls::kRandom:
        return random_bits();
    }
    return 0;
  };
  for (auto& x : pr.a) x = operand(true);
  for (auto& x : pr.bt) x = operand(false);
  if (cs.cls == Cls::kExact) {
    for (auto& x : pr.c) x = static_cast<float>(small_int(64));
  } else if (cs.cls == Cls::kRandom) {
    for (int p = 0; p < count; ++p) {
      for (int m = 0; m < kM; ++m) {
        for (int n = 0; n < v.n; ++n) {
          float& cv = pr.c[(static_cast<size_t>(p) * kM + m) * v.n + n];
          const uint32_t mode = rng() % 4u, sign = (rng() & 1u) << 31, mant = rng() & 0x7fffffu;
          if (mode == 0) {
            cv = 0.0f;
          } else if (mode == 1) {  // the products' magnitude: 2^-20..2^20
            cv = BitsToFloat(sign | ((127u + rng() % 41u - 20u) << 23) | mant);
          } else if (mode == 2) {  // much larger: 2^21..2^40
            cv = BitsToFloat(sign | ((127u + 21u + rng() % 20u) << 23) | mant);
          } else {  // cancels the first step's sum to within a few ulps
            const float s = static_cast<float>(DotRange(pr, p, m, n, 0, 16));
            const int64_t off = static_cast<int64_t>(rng() % 7u) - 3;
            const uint32_t b = FloatToBits(-s);
            cv = (b & 0x7fffffffu) > 8 ? BitsToFloat(static_cast<uint32_t>(b + off)) : -s;
          }
        }
      }
    }
  }
  return pr;
}

struct Outputs {
  std::vector<float> mma, wg, wg0, wgt;  // wgt: N % 64 == 0 only (ProbeTransKernel)
};

template <bool kBf16, int kN, int kSteps>
Outputs RunKernel(const Problems& pr) {
  const size_t out_n = static_cast<size_t>(pr.count) * kM * kN;
  uint16_t *da = ToDevice(pr.a), *db = ToDevice(pr.bt);
  float* dc = ToDevice(pr.c);
  float *dm = DeviceFloats(out_n), *dw = DeviceFloats(out_n), *dw0 = DeviceFloats(out_n);
  ProbeKernel<kBf16, kN, kSteps><<<pr.count, kThreads>>>(da, db, dc, dm, dw, dw0);
  PROBE_CUDA_CHECK(cudaGetLastError());
  PROBE_CUDA_CHECK(cudaDeviceSynchronize());
  Outputs o{FromDevice(dm, out_n), FromDevice(dw, out_n), FromDevice(dw0, out_n), {}};
  if constexpr (kN % 64 == 0) {
    float* dwt = DeviceFloats(out_n);
    ProbeTransKernel<kBf16, kN, kSteps><<<pr.count, kThreads>>>(da, db, dc, dwt);
    PROBE_CUDA_CHECK(cudaGetLastError());
    PROBE_CUDA_CHECK(cudaDeviceSynchronize());
    o.wgt = FromDevice(dwt, out_n);
  }
  for (void* ptr : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc)}) {
    PROBE_CUDA_CHECK(cudaFree(ptr));
  }
  return o;
}

template <bool kBf16>
Outputs Dispatch(const Problems& pr) {
  const int n = pr.n, s = pr.steps;
  if (n == 8 && s == 1) return RunKernel<kBf16, 8, 1>(pr);
  if (n == 8 && s == 2) return RunKernel<kBf16, 8, 2>(pr);
  if (n == 8 && s == 4) return RunKernel<kBf16, 8, 4>(pr);
  if (n == 32 && s == 1) return RunKernel<kBf16, 32, 1>(pr);
  if (n == 32 && s == 4) return RunKernel<kBf16, 32, 4>(pr);
  if (n == 64 && s == 1) return RunKernel<kBf16, 64, 1>(pr);
  if (n == 64 && s == 4) return RunKernel<kBf16, 64, 4>(pr);
  if (n == 128 && s == 2) return RunKernel<kBf16, 128, 2>(pr);
  if (n == 128 && s == 4) return RunKernel<kBf16, 128, 4>(pr);
  std::fprintf(stderr, "no kernel for n %d steps %d\n", n, s);
  std::exit(2);
}

// One comparison: got vs want element by element (TallyMismatches), the first mismatches printed
// with their products' range.
Tally Compare(const ClassSpec& cs, const Variant& v, const Problems& pr, const char* compare,
              const char* got_name, const std::vector<float>& got, const char* want_name,
              const std::vector<float>& want, bool by_value) {
  const Tally tl = TallyMismatches(got, want, by_value, 3, [&](size_t i) {
    const int p = static_cast<int>(i / (kM * v.n)), m = static_cast<int>(i / v.n % kM),
              n = static_cast<int>(i % v.n);
    double pmax = 0.0, pmin = INFINITY;
    int nonzero = 0;
    for (int k = 0; k < pr.K(); ++k) {
      const double q = std::fabs(pr.A(p, m, k) * pr.B(p, k, n));
      if (q == 0.0) continue;
      ++nonzero;
      pmax = std::max(pmax, q);
      pmin = std::min(pmin, q);
    }
    const float cv = pr.c[i];
    std::printf(
        "  %s %s m64n%dk16x%d %s: problem %d row %d col %d: %s %a (0x%08x) %s %a (0x%08x), "
        "%lld ulp; C %a, exact sum of products %a (+C: %.17g), %d nonzero products in "
        "[%a, %a]\n",
        cs.name, cs.bf16 ? "bf16" : "f16", v.n, v.steps, compare, p, m, n, got_name, got[i],
        FloatToBits(got[i]), want_name, want[i], FloatToBits(want[i]),
        static_cast<long long>(UlpDistance(got[i], want[i])), cv, DotRange(pr, p, m, n, 0, pr.K()),
        DotRange(pr, p, m, n, 0, pr.K()) + cv, nonzero, nonzero ? pmin : 0.0, pmax);
  });
  std::printf(
      "{\"probe\": \"wgmma_bits\", \"class\": \"%s\", \"type\": \"%s\", \"variant\": "
      "\"m64n%dk16x%d\", \"compare\": \"%s\", \"n\": %d, \"elements\": %lld, \"mismatches\": "
      "%lld, \"max_ulp\": %lld}\n",
      cs.name, cs.bf16 ? "bf16" : "f16", v.n, v.steps, compare, pr.count,
      static_cast<long long>(tl.elements), static_cast<long long>(tl.mismatches),
      static_cast<long long>(tl.max_ulp));
  std::fflush(stdout);
  return tl;
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  cudaDeviceProp prop{};
  if (!ProbeSetup(argc, argv, "probe_wgmma_bits", &count, &prop)) return 2;
  std::printf("# probe_wgmma_bits on %s, %d problems per class and variant\n", prop.name, count);

  const ClassSpec classes[] = {
      {"exact", Cls::kExact, false},       {"exact", Cls::kExact, true},
      {"fp4xe4m3", Cls::kFp4, false},      {"fp4s14xe4m3", Cls::kFp4S14, false},
      {"fp8xe4m3", Cls::kFp8, false},      {"random_f16", Cls::kRandom, false},
      {"random_bf16", Cls::kRandom, true},
  };
  const Variant variants[] = {{8, 1},  {8, 2},  {8, 4},   {32, 1}, {32, 4},
                              {64, 1}, {64, 4}, {128, 2}, {128, 4}};

  bool exact_ok = true;
  uint32_t seed = 20261203u;
  for (const ClassSpec& cs : classes) {
    const bool zero_c = cs.cls != Cls::kExact && cs.cls != Cls::kRandom;
    for (const Variant& v : variants) {
      const Problems pr = Generate(cs, v, count, seed++);
      const Outputs o = cs.bf16 ? Dispatch<true>(pr) : Dispatch<false>(pr);
      if (cs.cls == Cls::kExact) {
        std::vector<float> ref(o.mma.size()), ref_no_c(o.mma.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          const int p = static_cast<int>(i / (kM * v.n)), m = static_cast<int>(i / v.n % kM),
                    n = static_cast<int>(i % v.n);
          const double dot = DotRange(pr, p, m, n, 0, pr.K());
          ref_no_c[i] = static_cast<float>(dot);
          ref[i] = static_cast<float>(dot + pr.c[i]);
        }
        exact_ok &=
            Compare(cs, v, pr, "mma_vs_exact", "mma", o.mma, "exact", ref, true).mismatches == 0;
        exact_ok &=
            Compare(cs, v, pr, "wgmma_vs_exact", "wgmma", o.wg, "exact", ref, true).mismatches == 0;
        exact_ok &=
            Compare(cs, v, pr, "wgmma_d0_vs_exact", "wgmma_d0", o.wg0, "exact", ref_no_c, true)
                .mismatches == 0;
        if (!o.wgt.empty()) {
          exact_ok &= Compare(cs, v, pr, "wgmma_t_vs_exact", "wgmma_t", o.wgt, "exact", ref, true)
                          .mismatches == 0;
        }
      } else if (v.steps == 1) {
        // Sensitivity (information only): how often the tensor cores' result is not the double
        // sum rounded to fp32 — where they differ, a wgmma that matches mma.sync matches its
        // rounding, not just the exact value.
        std::vector<float> rn(o.mma.size());
        for (size_t i = 0; i < rn.size(); ++i) {
          const int p = static_cast<int>(i / (kM * v.n)), m = static_cast<int>(i / v.n % kM),
                    n = static_cast<int>(i % v.n);
          rn[i] = static_cast<float>(DotRange(pr, p, m, n, 0, 16) + pr.c[i]);
        }
        Compare(cs, v, pr, "mma_vs_double", "mma", o.mma, "double", rn, true);
      }
      Compare(cs, v, pr, "wgmma_vs_mma", "wgmma", o.wg, "mma", o.mma, false);
      if (zero_c) Compare(cs, v, pr, "wgmma_d0_vs_mma", "wgmma_d0", o.wg0, "mma", o.mma, false);
      if (!o.wgt.empty())
        Compare(cs, v, pr, "wgmma_t_vs_mma", "wgmma_t", o.wgt, "mma", o.mma, false);
    }
  }
  std::printf("# exact class (layouts): %s\n", exact_ok ? "pass" : "FAIL");
  return exact_ok ? 0 : 1;
}
