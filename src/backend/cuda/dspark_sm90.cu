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

// Block (request): the Markov term of prev into the slot's logits row, the greedy id (ties to the
// smallest id) and the confidence logit.
__global__ void __launch_bounds__(kMarkovThreads) MarkovStepKernel(MarkovStepParams p) {
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
  __syncthreads();
  float* row = p.logits + r * p.ld_logits;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int64_t v = threadIdx.x; v < p.vocab; v += blockDim.x) {
    float bias = 0.0f;
    for (int j = 0; j < p.rank; ++j)
      bias = fmaf(LoadAs(p.head, p.bf16, v * p.rank + j), e[j], bias);
    const float x = row[v] + bias;
    row[v] = x;
    if (x > bv) {  // v grows within a thread: the first maximum is the smallest id
      bv = x;
      bi = static_cast<int>(v);
    }
  }
  // Block argmax: the larger value, then the smaller id.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  if (lane == 0) {
    best_v[warp] = bv;
    best_i[warp] = bi;
  }
  // The confidence: proj · [xh ; e] in double.
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
    for (int w = 1; w < nw; ++w) {
      if (best_v[w] > v || (best_v[w] == v && best_i[w] < id)) {
        v = best_v[w];
        id = best_i[w];
      }
    }
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
  if (vocab < 1 || hidden < 1 || rank < 0 || rank > kMaxRank) {
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

void LaunchMarkovStep(const MarkovStepParams& p, StreamHandle stream) {
  if (p.requests <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(MarkovStepKernel, dim3(static_cast<unsigned>(p.requests)), dim3(kMarkovThreads), 0,
               stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
