#include <cuda_bf16.h>

#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/dspark.cuh"
#include "backend/cuda/launch.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMeanThreads = 256;
constexpr int kAttnThreads = 256;
constexpr int kMaxKeys = 512;  // context rows + block rows per slot
constexpr int kMarkovThreads = 512;
constexpr int kBiasThreads = 256;  // vocab rows per Markov bias block
constexpr int kMarkovGroup = 8;    // requests per Markov bias block (the head row read once)
constexpr int kMaxRank = 1024;
constexpr int kMaxDim = 1024;  // the attention's head dim with q_rope (its query in shared memory)
constexpr int kGatherThreads = 128;

// Block (t): row t's streams summed in order, then divided by hc (the CPU: sum / float(hc)).
__global__ void __launch_bounds__(kMeanThreads) StreamMeanKernel(StreamMeanParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const float* x = p.x + t * p.hc * p.dim;
  const float hc = static_cast<float>(p.hc);
  for (int64_t k = threadIdx.x; k < p.dim; k += blockDim.x) {
    float sum = 0.0f;
    for (int h = 0; h < p.hc; ++h) sum = __fadd_rn(sum, x[h * p.dim + k]);
    p.out[t * p.ld + k] = __fdiv_rn(sum, hc);
  }
}

// Block (head, slot row): the scores of the request's context rows and block rows, the softmax with
// the sink, the weighted sum of the rows (K = V), then the inverse RoPE of the trailing rope dims.
__global__ void __launch_bounds__(kAttnThreads) DSparkAttentionKernel(DSparkAttentionParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float scores[kMaxKeys];
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y, r = t / p.block_size;
  const int d = p.dim, lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  const int ctx = p.ctx_len[r], keys = ctx + p.block_size;
  const float* q = p.q + (t * p.heads + h) * d;
  __shared__ float qs[kMaxDim];
  if (p.q_rope) {  // the query with its RoPE at the slot's position, as the backbone's
    for (int i = threadIdx.x; i < d; i += blockDim.x) qs[i] = q[i];
    __syncthreads();
    const int half = p.rope_dim / 2, base = d - p.rope_dim;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      float a = qs[base + 2 * i], b = qs[base + 2 * i + 1];
      RotatePair(a, b, static_cast<int>(p.positions[t]), p.inv_freq[i], /*inverse=*/false);
      qs[base + 2 * i] = a;
      qs[base + 2 * i + 1] = b;
    }
    __syncthreads();
    q = qs;
  }
  auto key = [&](int j) -> const float* {
    return j < ctx ? p.ctx + (r * p.ctx_stride + j) * d
                   : p.block + (r * p.block_size + (j - ctx)) * d;
  };
  // A warp per key: lanes over the dims, a fixed butterfly order.
  for (int j = warp; j < keys; j += nw) {
    const float* k = key(j);
    float s = 0.0f;
    for (int i = lane; i < d; i += 32) s = fmaf(q[i], k[i], s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) scores[j] = s * p.scale;
  }
  __syncthreads();
  // The max and the denominator (the sink's term included), every thread the same in order.
  float m = p.sink[h];
  for (int j = 0; j < keys; ++j) m = fmaxf(m, scores[j]);
  __syncthreads();
  for (int j = threadIdx.x; j < keys; j += blockDim.x) scores[j] = expf(scores[j] - m);
  __syncthreads();
  float den = expf(p.sink[h] - m);
  for (int j = 0; j < keys; ++j) den += scores[j];
  const float inv = 1.0f / den;
  float* o = p.out + (t * p.heads + h) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc = fmaf(scores[j] * inv, key(j)[i], acc);
    o[i] = acc;
  }
  __syncthreads();
  // The inverse RoPE at the slot's position: pairs (2i, 2i + 1) of the trailing rope dims.
  const int half = p.rope_dim / 2, base = d - p.rope_dim;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float a = o[base + 2 * i], b = o[base + 2 * i + 1];
    RotatePair(a, b, static_cast<int>(p.positions[t]), p.inv_freq[i], /*inverse=*/true);
    o[base + 2 * i] = a;
    o[base + 2 * i + 1] = b;
  }
}

// Block (t): sum_i pre_i X_i of row t, in stream order (the mHC head's CollapseNorm before its
// norm, and the CPU's HcCollapse).
__global__ void __launch_bounds__(kMeanThreads) DSparkCollapseKernel(DSparkCollapseParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const float* x = p.x + t * p.hc * p.dim;
  const float* pre = p.pre + t * p.hc;
  for (int64_t k = threadIdx.x; k < p.dim; k += blockDim.x) {
    float s = 0;
    for (int i = 0; i < p.hc; ++i) s += pre[i] * x[i * p.dim + k];
    p.out[t * p.dim + k] = s;
  }
}

// Block (row j, request r): context row first + j of the request's ring, first = max(0, L - W).
__global__ void __launch_bounds__(kGatherThreads) DSparkGatherKernel(DSparkGatherParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t j = blockIdx.x, r = blockIdx.y;
  const int slot = p.slot[r * p.stride];
  const int64_t end = p.start[r * p.stride];
  const int64_t first = end > p.window ? end - p.window : 0;
  if (j == 0 && threadIdx.x == 0) p.len[r] = static_cast<int32_t>(end - first);
  if (first + j >= end) return;
  const float* src = p.ring.Row(slot, first + j);
  float* dst = p.out + (r * p.window + j) * p.dim;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) dst[i] = src[i];
}

__device__ __forceinline__ float LoadAs(const void* base, bool bf16, int64_t i) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i])
              : static_cast<const float*>(base)[i];
}

// The ordering of the greedy pick: the larger value, then the smaller id (a total order, so any
// reduction order gives the same pick; NaN never wins).
__device__ __forceinline__ void BetterOf(float ov, int oi, float& bv, int& bi) {
  if (ov > bv || (ov == bv && oi < bi)) {
    bv = ov;
    bi = oi;
  }
}

__device__ __forceinline__ void WarpBest(float& bv, int& bi) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    BetterOf(ov, oi, bv, bi);
  }
}

// Block (vocab tile, group of kMarkovGroup requests): thread v's Markov term head_r[v] · e for
// each request of the group (one fma chain over j = 0 .. rank - 1 per request, so a request's bits
// depend on neither the group nor the tile), added into the logits; then each request's best
// (value, id) of the tile into the scratch. The head row is read once for the group.
template <bool kBf16>
__global__ void __launch_bounds__(kBiasThreads) MarkovBiasKernel(MarkovStepParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float e[kMarkovGroup][kMaxRank];
  __shared__ float wv[kMarkovGroup][kBiasThreads / 32];
  __shared__ int wi[kMarkovGroup][kBiasThreads / 32];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kMarkovGroup;
  const int nr = static_cast<int>(p.requests - r0 < kMarkovGroup ? p.requests - r0 : kMarkovGroup);
  const int rank = p.rank;
  for (int i = threadIdx.x; i < nr * rank; i += blockDim.x) {
    const int q = i / rank, j = i % rank;
    e[q][j] = LoadAs(p.embed, kBf16, static_cast<int64_t>(p.prev[r0 + q]) * rank + j);
  }
  __syncthreads();
  const int64_t v = static_cast<int64_t>(blockIdx.x) * kBiasThreads + threadIdx.x;
  float bias[kMarkovGroup];
#pragma unroll
  for (int q = 0; q < kMarkovGroup; ++q) bias[q] = 0.0f;
  if (v < p.vocab && rank > 0) {
    const int64_t base = v * rank;
    if (rank % 8 == 0) {  // 8 values per load (a 16-byte aligned row piece)
      for (int j0 = 0; j0 < rank; j0 += 8) {
        float h[8];
        if constexpr (kBf16) {
          Bf16x8ToFloat(*reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.head) +
                                                        base + j0),
                        h);
        } else {
          const float* hp = static_cast<const float*>(p.head) + base + j0;
          const float4 a = *reinterpret_cast<const float4*>(hp);
          const float4 b = *reinterpret_cast<const float4*>(hp + 4);
          h[0] = a.x;
          h[1] = a.y;
          h[2] = a.z;
          h[3] = a.w;
          h[4] = b.x;
          h[5] = b.y;
          h[6] = b.z;
          h[7] = b.w;
        }
#pragma unroll
        for (int q = 0; q < kMarkovGroup; ++q) {
          if (q < nr) {
#pragma unroll
            for (int u = 0; u < 8; ++u) bias[q] = fmaf(h[u], e[q][j0 + u], bias[q]);
          }
        }
      }
    } else {
      for (int j = 0; j < rank; ++j) {
        const float h = LoadAs(p.head, kBf16, base + j);
#pragma unroll
        for (int q = 0; q < kMarkovGroup; ++q)
          if (q < nr) bias[q] = fmaf(h, e[q][j], bias[q]);
      }
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int q = 0; q < kMarkovGroup; ++q) {
    if (q >= nr) break;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    if (v < p.vocab) {
      float* row = p.logits + (r0 + q) * p.ld_logits;
      const float x = row[v] + bias[q];
      row[v] = x;
      BetterOf(x, static_cast<int>(v), bv, bi);
    }
    WarpBest(bv, bi);
    if (lane == 0) {
      wv[q][warp] = bv;
      wi[q][warp] = bi;
    }
  }
  __syncthreads();
  if (threadIdx.x < nr) {
    const int q = threadIdx.x;
    float bv = wv[q][0];
    int bi = wi[q][0];
    for (int w = 1; w < kBiasThreads / 32; ++w) BetterOf(wv[q][w], wi[q][w], bv, bi);
    const int64_t at = (r0 + q) * gridDim.x + blockIdx.x;
    p.best_v[at] = bv;
    p.best_i[at] = bi;
  }
}

// Block (request): the greedy id over the tiles' bests and the confidence logit
// proj · [xh ; e] in double; the id becomes the request's prev.
__global__ void __launch_bounds__(kMarkovThreads)
    MarkovFinishKernel(MarkovStepParams p, int tiles) {
  PdlTrigger();
  PdlWait();
  __shared__ float e[kMaxRank];
  __shared__ double dscratch[32];
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const int64_t r = blockIdx.x;
  const int prev = p.prev[r];
  for (int j = threadIdx.x; j < p.rank; j += blockDim.x)
    e[j] = LoadAs(p.embed, p.bf16, static_cast<int64_t>(prev) * p.rank + j);
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < tiles; i += blockDim.x)
    BetterOf(p.best_v[r * tiles + i], p.best_i[r * tiles + i], bv, bi);
  WarpBest(bv, bi);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
  }
  __syncthreads();  // e
  const float* xh = p.xh + r * p.ld_xh;
  double c = 0.0;
  for (int64_t k = threadIdx.x; k < p.hidden; k += blockDim.x)
    c += static_cast<double>(p.confidence_w[k]) * xh[k];
  for (int j = threadIdx.x; j < p.rank; j += blockDim.x)
    c += static_cast<double>(p.confidence_w[p.hidden + j]) * e[j];
  c = BlockSum(c, dscratch);  // (its barriers also publish best_v / best_i)
  if (threadIdx.x == 0) {
    float v = best_v[0];
    int id = best_i[0];
    for (int w = 1; w < nw; ++w) BetterOf(best_v[w], best_i[w], v, id);
    p.ids[r] = id;
    p.prev[r] = id;
    p.confidence[r] = static_cast<float>(c);
  }
}

}  // namespace

Status StreamMeanParams::Validate() const {
  if (hc < 1 || dim < 1 || ld < dim) return InvalidArgument("stream mean: bad hc, dim or ld");
  return Status::Ok();
}

Status DSparkAttentionParams::Validate() const {
  if (block_size < 1 || heads < 1 || dim < 1 || rope_dim < 0 || rope_dim > dim ||
      rope_dim % 2 != 0) {
    return InvalidArgument("dspark attention: bad block, heads, dim or rope_dim");
  }
  if (q_rope && dim > kMaxDim) {
    return Unimplemented("dspark attention: q_rope with head dim " + std::to_string(dim) +
                         " (at most " + std::to_string(kMaxDim) + ")");
  }
  if (ctx_stride + block_size > kMaxKeys) {
    return Unimplemented("dspark attention: " + std::to_string(ctx_stride + block_size) +
                         " keys per slot (at most " + std::to_string(kMaxKeys) + ")");
  }
  return Status::Ok();
}

Status DSparkCollapseParams::Validate() const {
  if (hc < 1 || dim < 1) return InvalidArgument("dspark collapse: bad hc or dim");
  return Status::Ok();
}

void LaunchDSparkCollapse(const DSparkCollapseParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(DSparkCollapseKernel, dim3(static_cast<unsigned>(p.n)), dim3(kMeanThreads), 0,
               stream, p);
  CUDA_CHECK_LAUNCH();
}

Status DSparkGatherParams::Validate() const {
  if (window < 1 || dim < 1 || ring.width != dim || ring.cap < window) {
    return InvalidArgument("dspark gather: bad window, dim or ring");
  }
  return Status::Ok();
}

void LaunchDSparkGatherContext(const DSparkGatherParams& p, StreamHandle stream) {
  if (p.requests <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(DSparkGatherKernel,
               dim3(static_cast<unsigned>(p.window), static_cast<unsigned>(p.requests)),
               dim3(kGatherThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

Status MarkovStepParams::Validate() const {
  if (vocab < 1 || vocab > (int64_t{1} << 31) - kBiasThreads || hidden < 1 || rank < 0 ||
      rank > kMaxRank) {
    return InvalidArgument("markov step: bad vocab, hidden or rank (at most " +
                           std::to_string(kMaxRank) + ")");
  }
  return Status::Ok();
}

void LaunchStreamMean(const StreamMeanParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(StreamMeanKernel, dim3(static_cast<unsigned>(p.n)), dim3(kMeanThreads), 0, stream,
               p);
  CUDA_CHECK_LAUNCH();
}

void LaunchDSparkAttention(const DSparkAttentionParams& p, StreamHandle stream) {
  if (p.requests <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(
      DSparkAttentionKernel,
      dim3(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.requests * p.block_size)),
      dim3(kAttnThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

int64_t MarkovStepTiles(int64_t vocab) { return (vocab + kBiasThreads - 1) / kBiasThreads; }

void LaunchMarkovStep(const MarkovStepParams& p, StreamHandle stream) {
  if (p.requests <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  const int64_t tiles = MarkovStepTiles(p.vocab);
  const dim3 grid(static_cast<unsigned>(tiles),
                  static_cast<unsigned>((p.requests + kMarkovGroup - 1) / kMarkovGroup));
  if (p.bf16)
    LaunchKernel(MarkovBiasKernel<true>, grid, dim3(kBiasThreads), 0, stream, p);
  else
    LaunchKernel(MarkovBiasKernel<false>, grid, dim3(kBiasThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
  LaunchKernel(MarkovFinishKernel, dim3(static_cast<unsigned>(p.requests)), dim3(kMarkovThreads), 0,
               stream, p, static_cast<int>(tiles));
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
