// The mHC post on the GPU (spec §2.3; hyper_connection.cuh): the streams' update after a
// sublayer, X[k] = post[k] y + sum_j C[j][k] X[j], with the MoE combine folded in and the next
// HcPre's mix partials computed on the way (HcPostMixSlices). The pre, the head and the
// embedding are in hyper_connection_sm90.cu.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_combine.cuh"

namespace dsinfer::backend::cuda {

namespace {

// One token's mHC post: its post weights, comb matrix and (MoE output) combine ranks, loaded once,
// then per column d: X[k][d] = post[k] y[d] + sum_j C[j][k] X[j][d] (xn: the new values).
// Column d of token t's updated streams, X_new[k] = post[k] * y + sum_j C[j][k] * X[j], stored
// and returned in xn (C and post: the token's, registers or shared memory).
template <int HC>
__device__ __forceinline__ void HcPostColumn(const HcPostParams& p, int64_t t, int64_t d, float yv,
                                             const float* C, const float* post,
                                             const float (&old)[HC], float (&xn)[HC]) {
  float* Xt = p.X + t * HC * p.D;
#pragma unroll
  for (int k = 0; k < HC; ++k) {
    float s = post[k] * yv;
#pragma unroll
    for (int j = 0; j < HC; ++j) s += C[j * HC + k] * old[j];
    Xt[k * p.D + d] = s;
    xn[k] = s;
  }
}

template <int HC>
struct HcPostToken {
  float C[HC * HC], post[HC];
  int rank[kMoeMaxK];
  __device__ __forceinline__ HcPostToken(const HcPostParams& p, int64_t t) {
#pragma unroll
    for (int j = 0; j < HC * HC; ++j) C[j] = __ldg(p.comb + t * HC * HC + j);
#pragma unroll
    for (int k = 0; k < HC; ++k) post[k] = __ldg(p.post + t * HC + k);
    if (p.y == nullptr) MoeCombineRanks(p.moe, t, rank);
  }
  __device__ __forceinline__ void Column(const HcPostParams& p, int64_t t, int64_t d,
                                         float (&xn)[HC]) const {
    float old[HC];
#pragma unroll
    for (int j = 0; j < HC; ++j) old[j] = p.X[(t * HC + j) * p.D + d];
    const float yv = p.y ? p.y[t * p.D + d] : MoeCombineAt(p.moe, t, rank, d);
    HcPostColumn<HC>(p, t, d, yv, C, post, old, xn);
  }
};

// HcPost that also computes the next HcPre's mix partials (HC = 4, one column per thread: grid
// (D / kPostMixThreads, ceil(n / tokens a block))): for each of its tokens t, block b writes
// part[(t * gridDim.x + b) * (nout + 1) + o], the sums of fn[o] . X_new (and of X_new^2,
// o = nout) over its columns of the four streams, reduced in a fixed order (warp butterflies,
// then the warps in order): HcPreFinish takes them as it takes HcMix's (mix_slices = gridDim.x).
// Saves the mix launch of every HcPre but the first. Two kernels, the same operations in the same
// order (a launch choice that never changes a bit): HcPostMixKernel, a token a block (decode), and
// from kHcPostMixManyRows rows HcPostMixManyKernel, many tokens a block sharing each thread's
// load of its column's mix weights.
constexpr int kPostMixThreads = 64;

// One step of WarpTransposedSums: a lane keeps the half of its kOff * 2 values that its lane bit
// kOff selects, adds its partner's copy of that half (own + partner, as the butterfly's
// `a += shfl_xor(a, kOff)`) and sends the other half.
template <int kOff>
__device__ __forceinline__ void TransposedStep(float (&v)[32], bool upper) {
#pragma unroll
  for (int i = 0; i < kOff; ++i) {
    const float keep = upper ? v[kOff + i] : v[i];
    const float send = upper ? v[i] : v[kOff + i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOff);
  }
}
// The warp sums of 32 values per lane (v[o] of every lane), returned in lane o: each sum is the
// butterfly's (`for off = 16, 8, 4, 2, 1: a += __shfl_xor_sync(a, off)`, whose lanes all end
// with the same bits), the same additions of the same partial sums, in 31 shuffles instead of
// 32 x 5. v is clobbered.
__device__ __forceinline__ float WarpTransposedSums(float (&v)[32]) {
  const int lane = threadIdx.x % 32;
  TransposedStep<16>(v, (lane & 16) != 0);
  TransposedStep<8>(v, (lane & 8) != 0);
  TransposedStep<4>(v, (lane & 4) != 0);
  TransposedStep<2>(v, (lane & 2) != 0);
  TransposedStep<1>(v, (lane & 1) != 0);
  return v[0];
}

// A token's column: the lane's kOut dot products w(o, k) . xn and its sum of squares, then their
// warp sums (lane o: value o; a butterfly's bits, WarpTransposedSums) into red_row[warp][o].
template <int HC, int kOut, typename Weight>
__device__ __forceinline__ void MixColumnSums(const float (&xn)[HC], Weight&& w,
                                              float (*red_row)[kOut + 1]) {
  float v[32];
#pragma unroll
  for (int o = 0; o < 32; ++o) {
    v[o] = 0.0f;
    if (o < kOut) {
#pragma unroll
      for (int k = 0; k < HC; ++k) v[o] = fmaf(w(o, k), xn[k], v[o]);
    } else if (o == kOut) {
#pragma unroll
      for (int k = 0; k < HC; ++k) v[o] = fmaf(xn[k], xn[k], v[o]);
    }
  }
  const float sum = WarpTransposedSums(v);
  const int lane = threadIdx.x % 32;
  if (lane <= kOut) red_row[threadIdx.x / 32][lane] = sum;
}
// The block's partials of its ntok tokens from their warp sums (the warps in order); the caller
// syncs before.
template <int kOut, int kW>
__device__ __forceinline__ void WriteMixPartials(const HcPostParams& p, int64_t t0, int ntok,
                                                 const float (*red)[kW][kOut + 1]) {
  for (int j = threadIdx.x; j < ntok * (kOut + 1); j += kPostMixThreads) {
    const int i = j / (kOut + 1), o = j % (kOut + 1);
    float v = red[i][0][o];
#pragma unroll
    for (int w = 1; w < kW; ++w) v += red[i][w][o];
    p.mix_part[((t0 + i) * gridDim.x + blockIdx.x) * (kOut + 1) + o] = v;
  }
}

// A token a block (decode sizes): the token's comb, post and combine ranks per thread
// (HcPostToken; staging them measured slower here: batch 256 1.32 -> 1.48 ms, docs/perf.md
// session 30), the mix weights through shared memory.
template <int HC>
__global__ void __launch_bounds__(kPostMixThreads, 8) HcPostMixKernel(HcPostParams p) {
  constexpr int kOut = (2 + HC) * HC, kW = kPostMixThreads / 32;
  static_assert(kOut + 1 <= 32, "the outputs and the sum of squares: one lane each");
  __shared__ float red[1][kW][kOut + 1];
  // The next mix's weights of the block's columns, [o][k][column] (each thread reads its own
  // column's; in registers they held the kernel at 219 registers, 8 warps an SM: 8,192-token
  // prefill hc_post 34.5 -> 24.8 ms with them here, docs/perf.md session 27).
  __shared__ float fws[kOut][HC][kPostMixThreads];
  PdlTrigger();
  const int64_t t = blockIdx.y;
  const int64_t d = blockIdx.x * int64_t{kPostMixThreads} + threadIdx.x;
  const int64_t K = HC * p.D;
  // Constant data: before the wait (each thread its own column, so no barrier).
#pragma unroll
  for (int o = 0; o < kOut; ++o)
#pragma unroll
    for (int k = 0; k < HC; ++k) fws[o][k][threadIdx.x] = LdgWeight(p.mix_fn + o * K + k * p.D + d);
  PdlWait();
  float xn[HC];
  HcPostToken<HC>(p, t).Column(p, t, d, xn);
  const auto weight = [&](int o, int k) { return fws[o][k][threadIdx.x]; };
  MixColumnSums<HC, kOut>(xn, weight, red[0]);
  __syncthreads();
  WriteMixPartials<kOut, kW>(p, t, 1, red);
}

// Many tokens a block (kTok, the launch's choice by rows): each thread's column's kOut x HC mix
// weights in registers for all the block's tokens; the tokens' comb, post and (MoE) combine order
// staged once in shared memory (each thread re-derived them per token: dependent loads ahead of
// every column's; session 30); the tokens' inputs (the old streams, y or the combine's rows in
// rank order, the shared row) through a ring of kPostRingStages tokens by 4-byte cp.async, each
// thread copying and reading only its own column's values, so no barrier per token. The weights
// used to come from shared memory, 96 four-byte loads per token and column, which held the kernel
// at 84.8% of the shared-memory pipe (session 47's ncu): now 5 ring loads per token and column
// (y) or 4 + K, plus the shared row (the MoE combine of K experts), and as many copies. bench_hc at
// 8,192 tokens (H100): post 788.6 -> 588.6 us, post_moe 1292.7 -> 976.3 (docs/perf.md, session 48).
constexpr int kPostRingStages = 4, kPostRingSlots = 4 + kMoeMaxK + 1;
template <int HC, int kTok>
__global__ void __launch_bounds__(kPostMixThreads, 6) HcPostMixManyKernel(HcPostParams p) {
  constexpr int kOut = (2 + HC) * HC, kW = kPostMixThreads / 32;
  static_assert(kOut + 1 <= 32 && HC <= 4, "the outputs and the sum of squares: one lane each");
  __shared__ float red[kTok][kW][kOut + 1];
  __shared__ float ring[kPostRingStages][kPostRingSlots][kPostMixThreads];
  __shared__ float s_comb[kTok][HC * HC], s_post[kTok][HC], s_w[kTok][kMoeMaxK];
  __shared__ int32_t s_pair[kTok][kMoeMaxK];
  PdlTrigger();
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int64_t d = blockIdx.x * int64_t{kPostMixThreads} + threadIdx.x;
  const int64_t K = HC * p.D;
  // Constant data: before the wait.
  float wr[kOut][HC];
#pragma unroll
  for (int o = 0; o < kOut; ++o)
#pragma unroll
    for (int k = 0; k < HC; ++k) wr[o][k] = LdgWeight(p.mix_fn + o * K + k * p.D + d);
  PdlWait();
  const int ntok = static_cast<int>(p.n - t0 < kTok ? p.n - t0 : kTok);
  const bool moe = p.y == nullptr;
  const int nrows = moe ? p.moe.K : 1;
  for (int j = threadIdx.x; j < ntok * HC * HC; j += kPostMixThreads)
    s_comb[j / (HC * HC)][j % (HC * HC)] = p.comb[t0 * HC * HC + j];
  for (int j = threadIdx.x; j < ntok * HC; j += kPostMixThreads)
    s_post[j / HC][j % HC] = p.post[t0 * HC + j];
  if (moe) {
    for (int i = threadIdx.x; i < ntok; i += kPostMixThreads)
      MoeCombineOrder(p.moe, t0 + i, s_pair[i], s_w[i]);
  }
  __syncthreads();
  // Token i's values into stage st: slots 0 .. HC - 1 the old streams, then y, or the pairs' rows
  // in rank order and the shared row.
  auto load = [&](int i, int st) {
    const int64_t t = t0 + i;
    float* r = &ring[st][0][threadIdx.x];
#pragma unroll
    for (int j = 0; j < HC; ++j)
      CpAsync4(r + j * kPostMixThreads, p.X + (t * HC + j) * p.D + d, true);
    if (!moe) {
      CpAsync4(r + HC * kPostMixThreads, p.y + t * p.D + d, true);
    } else {
      for (int q = 0; q < nrows; ++q)
        CpAsync4(r + (HC + q) * kPostMixThreads, p.moe.y + s_pair[i][q] * p.moe.D + d, true);
      if (p.moe.shared)
        CpAsync4(r + (HC + nrows) * kPostMixThreads, p.moe.shared + t * p.D + d, true);
    }
  };
#pragma unroll
  for (int st = 0; st < kPostRingStages - 1; ++st) {
    if (st < ntok) load(st, st);
    CpAsyncCommit();
  }
#pragma unroll 1
  for (int i = 0; i < ntok; ++i) {
    CpAsyncWait<kPostRingStages - 2>();  // token i's copies (this thread's own) have landed
    asm volatile("" ::: "memory");       // and the ring's loads below stay after the wait
    const float* r = &ring[i % kPostRingStages][0][threadIdx.x];
    float old[HC];
#pragma unroll
    for (int j = 0; j < HC; ++j) old[j] = r[j * kPostMixThreads];
    float yv;
    if (!moe) {
      yv = r[HC * kPostMixThreads];
    } else {
      float acc = 0.0f;  // MoeCombineSum's chain over the rows in rank order
      for (int q = 0; q < nrows; ++q) acc = fmaf(r[(HC + q) * kPostMixThreads], s_w[i][q], acc);
      if (p.moe.shared) acc += r[(HC + nrows) * kPostMixThreads];
      yv = acc;
    }
    // Stage (i - 1)'s slots, which this thread read in the previous iteration, take token
    // i + kPostRingStages - 1 (other rows than token i's stores).
    if (i + kPostRingStages - 1 < ntok)
      load(i + kPostRingStages - 1, (i + kPostRingStages - 1) % kPostRingStages);
    CpAsyncCommit();
    float xn[HC];
    HcPostColumn<HC>(p, t0 + i, d, yv, s_comb[i], s_post[i], old, xn);
    const auto weight = [&](int o, int k) { return wr[o][k]; };
    MixColumnSums<HC, kOut>(xn, weight, red[i]);
  }
  __syncthreads();
  WriteMixPartials<kOut, kW>(p, t0, ntok, red);
}

// HC > 0: hc known at compile time; comb and post are loaded into registers once (the runtime-hc
// loop re-loaded them after every X store, which may alias). Same operations in the same order.
template <int HC>
__global__ void HcPostKernelHc(HcPostParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.y;
  const HcPostToken<HC> tok(p, t);
  for (int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; d < p.D;
       d += int64_t{gridDim.x} * blockDim.x) {
    float xn[HC];
    tok.Column(p, t, d, xn);
  }
}

__global__ void HcPostKernel(HcPostParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.y;
  const int hc = p.hc;
  const float* C = p.comb + t * hc * hc;
  float* Xt = p.X + t * hc * p.D;
  int rank[kMoeMaxK];
  if (p.y == nullptr) MoeCombineRanks(p.moe, t, rank);
  for (int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; d < p.D;
       d += int64_t{gridDim.x} * blockDim.x) {
    float old[kMaxHc];
    for (int j = 0; j < hc; ++j) old[j] = Xt[j * p.D + d];
    const float yv = p.y ? p.y[t * p.D + d] : MoeCombineAt(p.moe, t, rank, d);
    for (int k = 0; k < hc; ++k) {
      float s = p.post[t * hc + k] * yv;
      for (int j = 0; j < hc; ++j) s += C[j * hc + k] * old[j];
      Xt[k * p.D + d] = s;
    }
  }
}

}  // namespace

int64_t HcPostMixSlices(int hc, int64_t D) {
  return hc == 4 && D % kPostMixThreads == 0 && D / kPostMixThreads <= 65535 ? D / kPostMixThreads
                                                                             : 0;
}

void LaunchHcPost(const HcPostParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  if (p.mix_fn != nullptr) {
    const int64_t slices = HcPostMixSlices(p.hc, p.D);
    if (slices == 0 || p.n > 65535) std::abort();  // callers check HcPostMixSlices first
    // The many-token kernel's ring and the staged combine order hold kMoeMaxK rows a token.
    DSINFER_CHECK_MSG(p.y != nullptr || p.moe.K <= kMoeMaxK, "HcPost: MoE combine K > kMoeMaxK");
    const auto many = [&](auto kernel, int64_t tokens) {
      LaunchKernel(
          kernel,
          dim3(static_cast<unsigned>(slices), static_cast<unsigned>((p.n + tokens - 1) / tokens)),
          dim3(kPostMixThreads), 0, stream, p);
    };
    // 32 tokens a block halve the weights' loads per token; below kHcPostMixWideRows 16 keep more
    // blocks than the SMs hold at once (bench_hc, 512 rows: post 46.4 -> 40.0 us with 16).
    if (p.n >= kHcPostMixWideRows) {
      many(HcPostMixManyKernel<4, 32>, 32);
    } else if (p.n >= kHcPostMixManyRows) {
      many(HcPostMixManyKernel<4, 16>, 16);
    } else {
      LaunchKernel(HcPostMixKernel<4>,
                   dim3(static_cast<unsigned>(slices), static_cast<unsigned>(p.n)),
                   dim3(kPostMixThreads), 0, stream, p);
    }
    CUDA_CHECK_LAUNCH();
    return;
  }
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>((p.D + 255) / 256, 16));
  const dim3 grid(bx, static_cast<unsigned>(p.n));
  switch (p.hc) {
    case 1:
      LaunchKernel(HcPostKernelHc<1>, dim3(grid), dim3(256), 0, stream, p);
      break;
    case 2:
      LaunchKernel(HcPostKernelHc<2>, dim3(grid), dim3(256), 0, stream, p);
      break;
    case 4:
      LaunchKernel(HcPostKernelHc<4>, dim3(grid), dim3(256), 0, stream, p);
      break;
    default:
      LaunchKernel(HcPostKernel, dim3(grid), dim3(256), 0, stream, p);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
