#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

namespace cg = cooperative_groups;

// Row softmax as the CPU reference (max-shifted; a row of -inf gives zeros). N > 0: n == N.
template <int N>
__device__ __forceinline__ void SoftmaxRow(float* x, int n_rt) {
  const int n = N > 0 ? N : n_rt;
  float m = x[0];
  #pragma unroll
  for (int i = 1; i < n; ++i) m = fmaxf(m, x[i]);
  if (m == -INFINITY) {
    #pragma unroll
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0;
  #pragma unroll
  for (int i = 0; i < n; ++i) {
    x[i] = expf(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  #pragma unroll
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

constexpr int kMixSlice = 256;    // inputs per slice (one block)
constexpr int kMixThreads = 128;  // 2 inputs per thread
constexpr int kMixTok = 4;        // tokens per block (weights re-read from L1/L2 less often)
constexpr int kMaxMixOut = 80;    // (2 + 8) * 8

constexpr int kMixPrefetch = 24;  // outputs whose weights are loaded before the dependency wait (hc = 4)

__global__ void __launch_bounds__(kMixThreads) HcMixKernel(HcMixParams p) {
  __shared__ float red[kMixThreads / 32][kMixTok][kMaxMixOut + 1];
  const int64_t slice = blockIdx.x, slices = gridDim.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kMixTok;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t k0 = slice * kMixSlice + threadIdx.x, k1 = k0 + kMixThreads;
  const bool in0 = k0 < p.K, in1 = k1 < p.K;
  PdlTrigger();
  // fn is a weight (constant): its first outputs are loaded while the previous kernel finishes.
  float wp0[kMixPrefetch], wp1[kMixPrefetch];
#pragma unroll
  for (int o = 0; o < kMixPrefetch; ++o) {
    const float* w = p.fn + static_cast<int64_t>(o) * p.K;
    const bool use = o < p.nout;
    wp0[o] = use && in0 ? LdgWeight(w + k0) : 0.0f;
    wp1[o] = use && in1 ? LdgWeight(w + k1) : 0.0f;
  }
  PdlWait();
  float x0[kMixTok], x1[kMixTok];
#pragma unroll
  for (int j = 0; j < kMixTok; ++j) {
    const bool tok = t0 + j < p.n;
    const float* x = p.X + (t0 + j) * p.ldx;
    x0[j] = tok && in0 ? x[k0] : 0.0f;
    x1[j] = tok && in1 ? x[k1] : 0.0f;
  }
  // Token slots past n are skipped (uniform over the block): at decode batch 1 three of the four
  // butterflies per output would reduce zeros.
  const int ntok = static_cast<int>(p.n - t0 < kMixTok ? p.n - t0 : kMixTok);
  auto reduce_store = [&](int o, float (&v)[kMixTok]) {
#pragma unroll
    for (int j = 0; j < kMixTok; ++j) {
      if (j >= ntok) break;
      float a = v[j];
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) a += __shfl_xor_sync(0xffffffffu, a, s);
      if (lane == 0) red[warp][j][o] = a;
    }
  };
  auto mix_out = [&](int o, float w0, float w1) {
    float v[kMixTok];
#pragma unroll
    for (int j = 0; j < kMixTok; ++j) v[j] = fmaf(w1, x1[j], w0 * x0[j]);
    reduce_store(o, v);
  };
#pragma unroll
  for (int o = 0; o < kMixPrefetch; ++o)
    if (o < p.nout) mix_out(o, wp0[o], wp1[o]);
#pragma unroll 2
  for (int o = kMixPrefetch; o < p.nout; ++o) {
    const float* w = p.fn + static_cast<int64_t>(o) * p.K;
    mix_out(o, in0 ? LdgWeight(w + k0) : 0.0f, in1 ? LdgWeight(w + k1) : 0.0f);
  }
  {
    float v[kMixTok];
#pragma unroll
    for (int j = 0; j < kMixTok; ++j) v[j] = fmaf(x1[j], x1[j], x0[j] * x0[j]);
    reduce_store(p.nout, v);
  }
  __syncthreads();
  const int w1 = p.nout + 1;
  for (int i = threadIdx.x; i < kMixTok * w1; i += kMixThreads) {
    const int j = i / w1, o = i % w1;
    if (t0 + j >= p.n) continue;
    float s = red[0][j][o];
#pragma unroll
    for (int q = 1; q < kMixThreads / 32; ++q) s += red[q][j][o];
    p.part[((t0 + j) * slices + slice) * w1 + o] = s;
  }
}

// Output o's partial sums, the one order every finish kernel adds them in (a function of the slice
// count alone): lane l adds slices l, l + 32, ... in order from 0, then the warp butterfly.
// PartialHeadLoad loads lane l's first kRedSlices / 32 of them (slices l, l + 32), so that a
// warp's loads of several outputs go out together before any sum; PartialSum then adds them and
// the rest, and every lane returns the sum.
constexpr int kRedOuts = 4, kRedSlices = 64;
__device__ __forceinline__ void PartialHeadLoad(const float* pt, int w1, int o, int64_t slices,
                                                float (&v)[kRedSlices / 32]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < kRedSlices / 32; ++h) {
    const int64_t i = lane + 32 * h;
    v[h] = i < slices ? pt[i * w1 + o] : 0.0f;
  }
}
__device__ __forceinline__ float PartialSum(const float* pt, int w1, int o, int64_t slices,
                                            const float (&v)[kRedSlices / 32]) {
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
#pragma unroll
  for (int h = 0; h < kRedSlices / 32; ++h)
    if (lane + 32 * h < slices) s += v[h];
  for (int64_t i = kRedSlices + lane; i < slices; i += 32) s += pt[i * w1 + o];
#pragma unroll
  for (int q = 16; q > 0; q >>= 1) s += __shfl_xor_sync(0xffffffffu, s, q);
  return s;
}

// Sum of the slice partials of token t into mixv[0..nout] (mixv[nout] = sum of squares); the
// caller syncs. Warp w takes outputs w, w + warps, ...; its first kRedOuts outputs' heads are
// loaded together before any sum (one memory round trip on the finish's critical path instead of
// one per output).
__device__ void ReducePartials(const float* part, int64_t t, int64_t slices, int nout, float* mixv) {
  const int w1 = nout + 1;
  const float* pt = part + t * slices * w1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  float v[kRedOuts][kRedSlices / 32];
#pragma unroll
  for (int j = 0; j < kRedOuts; ++j)
    if (warp + j * nw < w1) PartialHeadLoad(pt, w1, warp + j * nw, slices, v[j]);
#pragma unroll
  for (int j = 0; j < kRedOuts; ++j) {
    const int o = warp + j * nw;
    if (o >= w1) break;  // warp-uniform
    const float s = PartialSum(pt, w1, o, slices, v[j]);
    if (lane == 0) mixv[o] = s;
  }
  for (int o = warp + kRedOuts * nw; o < w1; o += nw) {
    float h[kRedSlices / 32];
    PartialHeadLoad(pt, w1, o, slices, h);
    const float s = PartialSum(pt, w1, o, slices, h);
    if (lane == 0) mixv[o] = s;
  }
}

// out[d] = sum_i pre[i] X[i, d], then out = RMSNorm(out) * norm_w in place (RmsNormKernel's order).
__device__ void CollapseNorm(const float* pre, const float* Xt, int hc, int64_t D, float* out,
                             const float* norm_w, float eps, float* scratch) {
  float ss = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * Xt[i * D + d];
    out[d] = s;
    ss = fmaf(s, s, ss);
  }
  ss = BlockSum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const float v = out[d] * scale;
    out[d] = norm_w ? norm_w[d] * v : v;
  }
}

// 1 / RMS of the token's flattened streams (mixv[(2 + HC) * HC] holds their sum of squares).
template <int HC>
__device__ __forceinline__ float HcMixRs(const HcPreFinishParams& p, const float* mixv) {
  return 1.0f / sqrtf(mixv[(2 + HC) * HC] / static_cast<float>(HC * p.D) + p.rms_eps);
}
// The collapse weight pre[i] (spec: sigmoid of the scaled mix plus base, plus eps).
__device__ __forceinline__ float HcPreWeightOf(float mix, float rs, float scale, float base,
                                               float hc_eps) {
  return SigmoidF(mix * rs * scale + base) + hc_eps;
}
template <int HC>
__device__ __forceinline__ float HcPreWeight(const HcPreFinishParams& p, const float* mixv,
                                             float rs, int i) {
  return HcPreWeightOf(mixv[i], rs, p.scale[0], p.base[i], p.hc_eps);
}

// The finish's mixing maths on one warp: lane l < HC*HC holds C[l / HC][l % HC]. Every row and
// column sum gathers its HC values by shuffles and adds them in the serial code's order (index
// ascending, from 0), and each lane does the serial code's operations on its own entry, so the
// results are bit-identical to the single-thread version below.
template <int HC>
__device__ __forceinline__ void SinkhornWarp(const HcPreFinishParams& p, int64_t t, const float* mixv,
                                             float* pre) {
  constexpr int kN = HC * HC;
  const int lane = threadIdx.x % 32;
  const int l = lane < kN ? lane : 0;
  const int j = l / HC, k = l % HC;
  const float rs = HcMixRs<HC>(p, mixv);
  const float eps = p.hc_eps;
  if (lane < HC) {
    pre[lane] = HcPreWeight<HC>(p, mixv, rs, lane);
    p.post[t * HC + lane] = 2.0f * SigmoidF(mixv[HC + lane] * rs * p.scale[1] + p.base[HC + lane]);
  }
  float c = mixv[2 * HC + l] * rs * p.scale[2] + p.base[2 * HC + l];
  // Row softmax (SoftmaxRow's order: max, double sum of expf in index order, one float inverse).
  {
    float row[HC];
#pragma unroll
    for (int i = 0; i < HC; ++i) row[i] = __shfl_sync(0xffffffffu, c, j * HC + i);
    float m = row[0];
#pragma unroll
    for (int i = 1; i < HC; ++i) m = fmaxf(m, row[i]);
    if (m == -INFINITY) {
      c = 0.0f;
    } else {
      double sum = 0;
#pragma unroll
      for (int i = 0; i < HC; ++i) sum += expf(row[i] - m);
      const float inv = static_cast<float>(1.0 / sum);
      c = expf(c - m) * inv;
    }
    c += eps;
  }
  auto col = [&] {
    float s = 0;
#pragma unroll
    for (int i = 0; i < HC; ++i) s += __shfl_sync(0xffffffffu, c, i * HC + k);
    c /= (s + eps);
  };
  auto rowsum = [&] {
    float s = 0;
#pragma unroll
    for (int i = 0; i < HC; ++i) s += __shfl_sync(0xffffffffu, c, j * HC + i);
    c /= (s + eps);
  };
  col();
  for (int it = 0; it + 1 < p.sinkhorn_iters; ++it) {
    rowsum();
    col();
  }
  if (lane < kN) p.comb[t * kN + lane] = c;
}

// CollapseNorm with hc known at compile time and D <= blockDim * kCollapsePer, in two steps:
// CollapseLoadHc loads every X value of the thread at once (one memory latency; the finish kernel
// issues it before the partial sums and the Sinkhorn, which do not need X), CollapseNormHcRegs then
// does CollapseNorm's operations in CollapseNorm's order on the registers (bit-identical).
constexpr int kCollapsePer = 8;
template <int HC>
__device__ __forceinline__ void CollapseLoadHc(const float* Xt, int64_t D, float (&xv)[kCollapsePer][HC]) {
#pragma unroll
  for (int q = 0; q < kCollapsePer; ++q) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
#pragma unroll
    for (int i = 0; i < HC; ++i) xv[q][i] = d < D ? __ldg(Xt + i * D + d) : 0.0f;
  }
}

template <int HC>
__device__ void CollapseNormHcRegs(const float (&xv)[kCollapsePer][HC], const float* pre, int64_t D,
                                   float* out, const float* norm_w, float eps, float* scratch) {
  float pw[HC];
#pragma unroll
  for (int i = 0; i < HC; ++i) pw[i] = pre[i];
  float sv[kCollapsePer];
  float ss = 0.0f;
#pragma unroll
  for (int q = 0; q < kCollapsePer; ++q) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
    float s = 0;
#pragma unroll
    for (int i = 0; i < HC; ++i) s += pw[i] * xv[q][i];
    sv[q] = s;
    if (d < D) ss = fmaf(s, s, ss);
  }
  ss = BlockSum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int q = 0; q < kCollapsePer; ++q) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
    if (d < D) {
      const float v = sv[q] * scale;
      out[d] = norm_w ? __ldg(norm_w + d) * v : v;
    }
  }
}

// The cluster barrier in its two halves (PTX barrier.cluster): a thread arrives, later waits for
// every thread of the cluster to have arrived. Arrive releases the thread's earlier stores
// (distributed shared memory among them) and wait acquires the others'; the relaxed arrive orders
// nothing and only marks the thread as started.
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// The finish split over a cluster of kSplitBlocks blocks (HC known, D a multiple of kSplitCols):
// grid (kSplitBlocks, n, 1), or (kSplitBlocks, n, 2) up to kHcOwnSinkhornMaxRows rows (below).
// Block r collapses and normalizes the token's columns [r D / kSplitBlocks, (r + 1) D /
// kSplitBlocks), each thread kPer of them. The token's mix partials are reduced once, spread over
// the cluster, one output a warp (PartialSum: the bits of ReducePartials): every block sums the
// outputs its collapse needs (the HC pre gates and the sum of squares) and a kSplitBlocks-th of the
// Sinkhorn's (post, comb), which it stores into block 0's shared memory. Every block then stores
// its columns' sum of squares into every block's shared memory, and one cluster barrier publishes
// both exchanges: each block adds the sums in block order, and block 0's first warp runs the
// Sinkhorn after its stores, off the others' paths. No block reads another's shared memory, so none
// waits for the others before it exits; the barrier phase that every thread arrives at on entry
// (relaxed) and waits for before its first remote store is what makes the stores wait for their
// targets to run.
constexpr int kSplitBlocks = 4, kSplitThreads = 256;
constexpr int64_t kSplitCols = kSplitBlocks * kSplitThreads;
// Up to this many rows the Sinkhorn runs in a cluster of its own (z = 1; its block 0 reduces every
// output itself, as before session 48), so the token's latency does not include it; above, block
// 0 runs it after the collapse and the z = 1 half of the grid is not launched. Either way the same
// bits.
constexpr int64_t kHcOwnSinkhornMaxRows = 256;

// kPer <= 4: 4 blocks an SM (64 registers a thread), so that more tokens' loads and barriers are
// in flight: bench_hc's pre at 8,192 tokens 663 -> 555 us, at 256 tokens 23.0 -> 20.0 us (H100;
// the same bits: docs/perf.md, session 39).
template <int HC, int kPer>
__global__ void __launch_bounds__(kSplitThreads, kPer <= 4 ? 4 : 1)
    HcPreFinishSplitKernel(HcPreFinishParams p, int64_t slices) {
  constexpr int kNout = (2 + HC) * HC, kW1 = kNout + 1, kWarps = kSplitThreads / 32;
  constexpr int kNeed = HC + 1;  // warps 0 .. HC: the pre gates, the sum of squares
  constexpr int kShare = (kNout - HC) / kSplitBlocks;  // a block's share of outputs HC .. kNout - 1
  constexpr int kSpare = kWarps - kNeed, kSharePer = (kShare + kSpare - 1) / kSpare;
  static_assert((kNout - HC) % kSplitBlocks == 0 && kSpare > 0, "the outputs over the cluster");
  __shared__ float mixv[kW1];
  __shared__ float pre[HC];
  __shared__ float sinkhorn_pre[HC];  // SinkhornWarp's copy of the pre weights (unused here)
  __shared__ float scratch[32];
  __shared__ float ss_all[kSplitBlocks];
  const int64_t t = blockIdx.y;
  const int rank = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Decode sizes (grid z = 2): the Sinkhorn's own cluster, whose block 0 reduces every output
  // itself and runs it beside the collapse instead of after it.
  const bool own_sinkhorn = gridDim.z == 2;
  if (blockIdx.z == 1) {
    if (p.trigger == 0) PdlTrigger();
    PdlWait();
    if (p.trigger == 1) PdlTrigger();
    if (rank != 0) return;
    ReducePartials(p.part, t, slices, kNout, mixv);
    __syncthreads();
    if (warp == 0) SinkhornWarp<HC>(p, t, mixv, sinkhorn_pre);
    return;
  }
  ClusterArriveRelaxed();
  if (p.trigger == 0) PdlTrigger();
  const int64_t cols = p.D / kSplitBlocks, c0 = rank * cols;
  cg::cluster_group cluster = cg::this_cluster();
  // Constant weights before the wait (the launch contract allows them): the pre weights' scale and
  // base and the thread's RMSNorm weights, which the collapse would otherwise fetch after the mix
  // reduction and after the norm's cluster sum, each a memory round trip on the critical path.
  const float pre_scale = p.scale[0];
  const float pre_base = threadIdx.x < HC ? p.base[threadIdx.x] : 0.0f;
  float nw[kPer];
#pragma unroll
  for (int q = 0; q < kPer; ++q)
    nw[q] = p.norm_w ? __ldg(p.norm_w + c0 + q * kSplitThreads + threadIdx.x) : 0.0f;
  PdlWait();  // X and the mix partials come from earlier kernels (the post may have written both)
  if (p.trigger == 1) PdlTrigger();
  // The block's columns load under the sums.
  float xv[kPer][HC];
  {
    const float* Xt = p.X + t * HC * p.D;
#pragma unroll
    for (int q = 0; q < kPer; ++q)
#pragma unroll
      for (int i = 0; i < HC; ++i)
        xv[q][i] = __ldg(Xt + i * p.D + c0 + q * kSplitThreads + threadIdx.x);
  }
  const float* pt = p.part + t * slices * kW1;
  if (warp < kNeed) {
    const int o = warp < HC ? warp : kNout;
    float h[kRedSlices / 32];
    PartialHeadLoad(pt, kW1, o, slices, h);
    const float s = PartialSum(pt, kW1, o, slices, h);
    if (lane == 0) mixv[o] = s;
    ClusterWait();
  } else if (own_sinkhorn) {
    ClusterWait();
  } else {
    // Outputs HC + rank * kShare + j, j = warp - kNeed, + kSpare, ...: their heads load together.
    float h[kSharePer][kRedSlices / 32], sums[kSharePer];
#pragma unroll
    for (int i = 0; i < kSharePer; ++i) {
      const int j = warp - kNeed + i * kSpare;
      if (j < kShare) PartialHeadLoad(pt, kW1, HC + rank * kShare + j, slices, h[i]);
    }
#pragma unroll
    for (int i = 0; i < kSharePer; ++i) {
      const int j = warp - kNeed + i * kSpare;
      if (j < kShare) sums[i] = PartialSum(pt, kW1, HC + rank * kShare + j, slices, h[i]);
    }
    ClusterWait();  // block 0 runs
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < kSharePer; ++i) {
        const int j = warp - kNeed + i * kSpare;
        if (j < kShare) *cluster.map_shared_rank(&mixv[HC + rank * kShare + j], 0) = sums[i];
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < HC) {
    const float w =
        HcPreWeightOf(mixv[threadIdx.x], HcMixRs<HC>(p, mixv), pre_scale, pre_base, p.hc_eps);
    if (p.pre_out != nullptr && rank == 0) p.pre_out[t * HC + threadIdx.x] = w;
    pre[threadIdx.x] = p.pre_in != nullptr ? p.pre_in[t * HC + threadIdx.x] : w;
  }
  __syncthreads();
  float pw[HC];
#pragma unroll
  for (int i = 0; i < HC; ++i) pw[i] = pre[i];
  float sv[kPer], ss = 0.0f;
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    float s = 0;
#pragma unroll
    for (int i = 0; i < HC; ++i) s += pw[i] * xv[q][i];
    sv[q] = s;
    ss = fmaf(s, s, ss);
  }
  ss = BlockSum(ss, scratch);
  if (threadIdx.x < kSplitBlocks) *cluster.map_shared_rank(&ss_all[rank], threadIdx.x) = ss;
  ClusterArrive();
  ClusterWait();
  float total = 0.0f;
#pragma unroll
  for (int r = 0; r < kSplitBlocks; ++r) total += ss_all[r];
  const float scale = 1.0f / sqrtf(total / static_cast<float>(p.D) + p.rms_eps);
  float* out = p.xn + t * p.D;
  float ov[kPer];
#pragma unroll
  for (int q = 0; q < kPer; ++q) {
    const int64_t d = c0 + q * kSplitThreads + threadIdx.x;
    const float v = sv[q] * scale;
    ov[q] = p.norm_w ? nw[q] * v : v;
    out[d] = ov[q];
  }
  if (p.xq != nullptr || p.xc != nullptr) {
    // act_quant of the block's columns: a 128-column block is 4 warps' values of one q (c0 is a
    // multiple of 256), its max over them through shared memory.
    __shared__ float wmax[kPer][kSplitThreads / 32];
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      float a = fabsf(ov[q]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
      if (lane == 0) wmax[q][warp] = a;
    }
    __syncthreads();
    const int w0 = (threadIdx.x / qcore::kQb) * (qcore::kQb / 32);
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int64_t d = c0 + q * kSplitThreads + threadIdx.x;
      const float amax =
          fmaxf(fmaxf(wmax[q][w0], wmax[q][w0 + 1]), fmaxf(wmax[q][w0 + 2], wmax[q][w0 + 3]));
      float inv;
      const float s = qcore::QuantScaleOf(amax, &inv);
      if (p.xq != nullptr) {
        p.xq[t * p.ldq + d] = qcore::QuantValueF16(ov[q] * inv);
        if (threadIdx.x % qcore::kQb == 0) p.xs[t * p.lds + d / qcore::kQb] = s;
      }
      if (p.xc != nullptr) {
        p.xc[t * p.ldc + d] = qcore::QuantCode(ov[q] * inv);
        if (threadIdx.x % qcore::kQb == 0) p.xcs[(d / qcore::kQb) * p.ldcs + t] = s;
      }
    }
  }
  if (p.trigger == 2) PdlTrigger();
  if (!own_sinkhorn && rank == 0 && warp == 0) SinkhornWarp<HC>(p, t, mixv, sinkhorn_pre);
}

// HC > 0: hc known at compile time (the Sinkhorn matrix lives in registers); 0: runtime hc.
template <int HC>
__global__ void HcPreFinishKernel(HcPreFinishParams p, int64_t slices) {
  PdlTrigger();
  PdlWait();
  __shared__ float pre[kMaxHc];
  __shared__ float mixv[kMaxMixOut + 1];
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const int hc = HC > 0 ? HC : p.hc;
  const int nout = (2 + hc) * hc;
  // X (from an earlier kernel: read after the wait) loads under the sums and the Sinkhorn.
  float xv[kCollapsePer][HC > 0 ? HC : 1];
  const bool x_in_regs = HC > 0 && p.D <= static_cast<int64_t>(blockDim.x) * kCollapsePer;
  if constexpr (HC > 0) {
    if (x_in_regs) CollapseLoadHc<HC>(p.X + t * HC * p.D, p.D, xv);
  }
  ReducePartials(p.part, t, slices, nout, mixv);
  __syncthreads();
  if constexpr (HC > 0 && HC * HC <= 32) {
    if (threadIdx.x < 32) SinkhornWarp<HC>(p, t, mixv, pre);
  } else if (threadIdx.x == 0) {
    const float K = static_cast<float>(hc * p.D);
    const float rs = 1.0f / sqrtf(mixv[nout] / K + p.rms_eps);
    float m[HC > 0 ? (2 + HC) * HC : kMaxMixOut];
#pragma unroll
    for (int j = 0; j < nout; ++j) m[j] = mixv[j] * rs;
    const float eps = p.hc_eps;
    float C[HC > 0 ? HC * HC : kMaxHc * kMaxHc];
    #pragma unroll
    for (int i = 0; i < hc; ++i) {
      pre[i] = SigmoidF(m[i] * p.scale[0] + p.base[i]) + eps;
      p.post[t * hc + i] = 2.0f * SigmoidF(m[hc + i] * p.scale[1] + p.base[hc + i]);
    }
    #pragma unroll
    for (int j = 0; j < hc * hc; ++j) C[j] = m[2 * hc + j] * p.scale[2] + p.base[2 * hc + j];
    #pragma unroll
    for (int j = 0; j < hc; ++j) {
      SoftmaxRow<HC>(C + j * hc, hc);
      #pragma unroll
      for (int k = 0; k < hc; ++k) C[j * hc + k] += eps;
    }
    // Each row (rows) or column (!rows) divided by its sum + eps, summed in index order.
    auto normalize = [&](bool rows) {
      #pragma unroll
      for (int a = 0; a < hc; ++a) {
        auto at = [&](int b) -> float& { return rows ? C[a * hc + b] : C[b * hc + a]; };
        float s = 0;
        #pragma unroll
        for (int b = 0; b < hc; ++b) s += at(b);
        #pragma unroll
        for (int b = 0; b < hc; ++b) at(b) /= (s + eps);
      }
    };
    normalize(false);
    for (int it = 0; it + 1 < p.sinkhorn_iters; ++it) {
      normalize(true);
      normalize(false);
    }
    #pragma unroll
    for (int j = 0; j < hc * hc; ++j) p.comb[t * hc * hc + j] = C[j];
  }
  __syncthreads();
  if (p.pre_out != nullptr || p.pre_in != nullptr) {  // single-pass mHC: keep ours, use the last
    if (threadIdx.x < hc) {
      if (p.pre_out != nullptr) p.pre_out[t * hc + threadIdx.x] = pre[threadIdx.x];
      if (p.pre_in != nullptr) pre[threadIdx.x] = p.pre_in[t * hc + threadIdx.x];
    }
    __syncthreads();
  }
  if constexpr (HC > 0) {
    if (x_in_regs) {
      CollapseNormHcRegs<HC>(xv, pre, p.D, p.xn + t * p.D, p.norm_w, p.rms_eps, scratch);
      return;
    }
  }
  CollapseNorm(pre, p.X + t * hc * p.D, hc, p.D, p.xn + t * p.D, p.norm_w, p.rms_eps, scratch);
}

// HC > 0: hc known at compile time and X loaded into registers under the partial sums (the
// runtime loop of CollapseNorm makes a memory round trip per value); 0: runtime hc.
template <int HC>
__global__ void HcHeadFinishKernel(HcHeadFinishParams p, int64_t slices) {
  PdlTrigger();
  PdlWait();
  __shared__ float pre[kMaxHc];
  __shared__ float mixv[kMaxMixOut + 1];
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  float xv[kCollapsePer][HC > 0 ? HC : 1];
  const bool x_in_regs = HC > 0 && p.D <= static_cast<int64_t>(blockDim.x) * kCollapsePer;
  if constexpr (HC > 0) {
    if (x_in_regs) CollapseLoadHc<HC>(p.X + t * HC * p.D, p.D, xv);
  }
  if (p.pre_in != nullptr) {  // single-pass mHC: the last site's weights
    if (threadIdx.x < p.hc) pre[threadIdx.x] = p.pre_in[t * p.hc + threadIdx.x];
  } else {
    ReducePartials(p.part, t, slices, p.hc, mixv);
    __syncthreads();
    if (threadIdx.x < p.hc) {
      const int i = threadIdx.x;
      const float rs = 1.0f / sqrtf(mixv[p.hc] / static_cast<float>(p.hc * p.D) + p.rms_eps);
      pre[i] = SigmoidF(mixv[i] * rs * p.scale[0] + p.base[i]) + p.hc_eps;
    }
  }
  __syncthreads();
  if constexpr (HC > 0) {
    if (x_in_regs) {
      CollapseNormHcRegs<HC>(xv, pre, p.D, p.out + t * p.D, p.norm_w, p.rms_eps, scratch);
      return;
    }
  }
  CollapseNorm(pre, p.X + t * p.hc * p.D, p.hc, p.D, p.out + t * p.D, p.norm_w, p.rms_eps, scratch);
}

// Grid (n, column chunks of kEmbedThreads * kEmbedPer): a thread loads its kEmbedPer values of
// the row first, then stores them to every stream (one memory round trip instead of one per
// value: the stores may alias the table as far as the compiler knows).
constexpr int kEmbedThreads = 256, kEmbedPer = 4;
__global__ void __launch_bounds__(kEmbedThreads) EmbedKernel(EmbedParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const int64_t id = p.ids[t];
  float* X = p.X + t * p.hc * p.D;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kEmbedThreads * kEmbedPer + threadIdx.x;
  float v[kEmbedPer];
#pragma unroll
  for (int q = 0; q < kEmbedPer; ++q) {
    const int64_t d = c0 + q * kEmbedThreads;
    v[q] = 0.0f;
    if (d < p.D) {
      v[q] = p.table_bf16
                 ? __uint_as_float(static_cast<uint32_t>(__ldg(
                                       static_cast<const uint16_t*>(p.table) + id * p.D + d))
                                   << 16)
                 : __ldg(static_cast<const float*>(p.table) + id * p.D + d);
    }
  }
#pragma unroll
  for (int q = 0; q < kEmbedPer; ++q) {
    const int64_t d = c0 + q * kEmbedThreads;
    if (d < p.D)
      for (int i = 0; i < p.hc; ++i) X[i * p.D + d] = v[q];
  }
}

// Row i of dst = row rows[i] of src; blockIdx.y splits a row into slices of kGatherSlice floats.
constexpr int kGatherSlice = 4096;
__global__ void GatherRowsKernel(const float* src, const int32_t* rows, int64_t width, float* dst) {
  PdlTrigger();
  PdlWait();
  const int64_t i = blockIdx.x;
  const float* s = src + static_cast<int64_t>(rows[i]) * width;
  float* d = dst + i * width;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kGatherSlice;
  const int64_t c1 = min(width, c0 + kGatherSlice);
  if (width % 4 == 0) {
    for (int64_t c = c0 + 4 * threadIdx.x; c < c1; c += 4 * blockDim.x) {
      *reinterpret_cast<float4*>(d + c) = *reinterpret_cast<const float4*>(s + c);
    }
  } else {
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) d[c] = s[c];
  }
}

}  // namespace

namespace {
Status CheckHc(int hc) {
  if (hc < 1 || hc > kMaxHc) {
    return Unimplemented("mHC: hc_mult " + std::to_string(hc) + " (the kernels take 1.." +
                         std::to_string(kMaxHc) + ")");
  }
  return Status::Ok();
}
}  // namespace

Status HcMixParams::Validate() const {
  if (nout < 1 || nout > kMaxMixOut) {
    return Unimplemented("mHC mix: " + std::to_string(nout) + " outputs (the kernel takes up to " +
                         std::to_string(kMaxMixOut) + ")");
  }
  return Status::Ok();
}
Status HcPreFinishParams::Validate() const {
  if (xc != nullptr && (xcs == nullptr || ldc < MmaQuantLd(D) || ldcs < n)) {
    return InvalidArgument("mHC pre: the codes' layout (ldc " + std::to_string(ldc) + ", ldcs " +
                           std::to_string(ldcs) + ")");
  }
  return CheckHc(hc);
}
Status HcHeadFinishParams::Validate() const { return CheckHc(hc); }

int64_t HcMixSlices(int64_t K) { return (K + kMixSlice - 1) / kMixSlice; }

void LaunchHcMix(const HcMixParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  const dim3 grid(static_cast<unsigned>(HcMixSlices(p.K)), static_cast<unsigned>((p.n + kMixTok - 1) / kMixTok));
  LaunchKernel(HcMixKernel, dim3(grid), dim3(kMixThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchHcPreFinish(const HcPreFinishParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  const unsigned grid = static_cast<unsigned>(p.n);
  const int threads = NormThreads(p.D);
  const int64_t slices = p.mix_slices > 0 ? p.mix_slices : HcMixSlices(p.hc * p.D);
  // The split kernel for hc = 4 and D a multiple of 1,024 up to 8,192 (flash: 4 x 4,096), the
  // one-block kernel otherwise: a model always takes the same one (batch invariance).
  const int64_t per = p.D / kSplitCols;
  if (p.hc == 4 && p.D % kSplitCols == 0 && (per == 1 || per == 2 || per == 4 || per == 8)) {
    constexpr int64_t kMaxRows = 65535;  // grid.y
    for (int64_t t0 = 0; t0 < p.n; t0 += kMaxRows) {
      HcPreFinishParams q = p;
      const int64_t w1 = (2 + p.hc) * p.hc + 1;
      q.part = p.part + t0 * slices * w1;
      q.X = p.X + t0 * p.hc * p.D;
      q.xn = p.xn + t0 * p.D;
      q.post = p.post + t0 * p.hc;
      q.comb = p.comb + t0 * p.hc * p.hc;
      if (p.pre_in != nullptr) q.pre_in = p.pre_in + t0 * p.hc;
      if (p.pre_out != nullptr) q.pre_out = p.pre_out + t0 * p.hc;
      if (p.xq != nullptr) {
        q.xq = p.xq + t0 * p.ldq;
        q.xs = p.xs + t0 * p.lds;
      }
      if (p.xc != nullptr) {
        q.xc = p.xc + t0 * p.ldc;
        q.xcs = p.xcs + t0;
      }
      q.n = std::min(kMaxRows, p.n - t0);
      const dim3 g(kSplitBlocks, static_cast<unsigned>(q.n), p.n <= kHcOwnSinkhornMaxRows ? 2 : 1);
      auto go = [&](auto kernel) {
        LaunchKernelClustered(kernel, g, dim3(kSplitThreads), 0, stream, kSplitBlocks, q, slices);
      };
      switch (per) {
        case 1:
          go(HcPreFinishSplitKernel<4, 1>);
          break;
        case 2:
          go(HcPreFinishSplitKernel<4, 2>);
          break;
        case 4:
          go(HcPreFinishSplitKernel<4, 4>);
          break;
        default:
          go(HcPreFinishSplitKernel<4, 8>);
          break;
      }
      CUDA_CHECK_LAUNCH();
    }
    return;
  }
  switch (p.hc) {
    case 1: LaunchKernel(HcPreFinishKernel<1>, dim3(grid), dim3(threads), 0, stream, p, slices); break;
    case 2: LaunchKernel(HcPreFinishKernel<2>, dim3(grid), dim3(threads), 0, stream, p, slices); break;
    case 4: LaunchKernel(HcPreFinishKernel<4>, dim3(grid), dim3(threads), 0, stream, p, slices); break;
    default: LaunchKernel(HcPreFinishKernel<0>, dim3(grid), dim3(threads), 0, stream, p, slices); break;
  }
  CUDA_CHECK_LAUNCH();
  if (p.xq != nullptr) {  // the one-block kernel does not quantize: the pre-pass (the same bits)
    ActQuantParams a;
    a.x = p.xn; a.ldx = p.D; a.rows = p.n; a.k = p.D;
    a.q = p.xq; a.ldq = p.ldq; a.s = p.xs; a.lds = p.lds;
    LaunchActQuant(a, stream);
  }
  if (p.xc != nullptr) LaunchMmaActQuant(p.xn, p.D, p.n, p.D, p.xc, p.ldc, p.xcs, p.ldcs, stream);
}

void LaunchHcHeadFinish(const HcHeadFinishParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(p.hc == 4 ? HcHeadFinishKernel<4> : HcHeadFinishKernel<0>,
               dim3(static_cast<unsigned>(p.n)), dim3(NormThreads(p.D)), 0, stream, p,
               HcMixSlices(p.hc * p.D));
  CUDA_CHECK_LAUNCH();
}

void LaunchEmbed(const EmbedParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  const int64_t chunk = int64_t{kEmbedThreads} * kEmbedPer;
  LaunchKernel(EmbedKernel, dim3(static_cast<unsigned>(p.n), static_cast<unsigned>((p.D + chunk - 1) / chunk)),
               dim3(kEmbedThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchGatherRows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst,
                      StreamHandle stream) {
  if (n <= 0) return;
  const unsigned slices = static_cast<unsigned>((width + kGatherSlice - 1) / kGatherSlice);
  LaunchKernel(GatherRowsKernel, dim3(static_cast<unsigned>(n), slices), dim3(256), 0, stream, src, rows, width, dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
