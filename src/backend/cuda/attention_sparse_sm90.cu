#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 16;  // dim <= 512

__global__ void __launch_bounds__(kWarps * 32) SparseAttentionKernel(SparseAttentionParams p) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_o[kWarps][512];
  __shared__ float out_row[512];
  const int64_t t = blockIdx.x / p.heads;
  const int h = blockIdx.x % p.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int pos = p.meta.pos[t], slot = p.meta.slot[t];
  const int seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  const int dim = p.dim;
  const int n_win = min(p.window_size, pos + 1);
  int n_comp = 0;
  if (p.rate > 0) n_comp = p.sel ? p.sel_count[t] : (pos + 1) / p.rate;
  const int n_keys = n_win + n_comp;

  float q[kMaxPerLane], o[kMaxPerLane];
  const float* qrow = p.q + (t * p.heads + h) * dim;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + 32 * i;
    q[i] = c < dim ? qrow[c] : 0.0f;
    o[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = warp; j < n_keys; j += kWarps) {
    const float* key;
    if (j < n_win) {
      const int s = pos - n_win + 1 + j;
      key = s >= seg_start ? p.kv + (static_cast<int64_t>(seg_begin) + s - seg_start) * dim
                           : p.window.data + slot * p.window.slot_stride + (s % p.window.cap) * p.window.width;
    } else {
      const int e = p.sel ? p.sel[t * p.sel_stride + (j - n_win)] : j - n_win;
      key = p.comp.data + slot * p.comp.slot_stride + static_cast<int64_t>(e) * p.comp.width;
    }
    float kr[kMaxPerLane];
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int c = lane + 32 * i;
      kr[i] = c < dim ? key[c] : 0.0f;
      dot = fmaf(q[i], kr[i], dot);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float z = dot * p.scale;
    const float m_new = fmaxf(m, z);
    const float corr = expf(m - m_new);  // m = -inf first: corr = 0
    const float e = expf(z - m_new);
    l = l * corr + e;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) o[i] = o[i] * corr + e * kr[i];
    m = m_new;
  }
  if (lane == 0) {
    part_m[warp] = m;
    part_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int c = lane + 32 * i;
    if (c < dim) part_o[warp][c] = o[i];
  }
  __syncthreads();
  const float sink = p.sink[h];
  float M = sink;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_m[w]);
  float den = expf(sink - M);
  for (int w = 0; w < kWarps; ++w)
    if (part_m[w] != -INFINITY) den += part_l[w] * expf(part_m[w] - M);
  const float inv = 1.0f / den;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float s = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (part_m[w] != -INFINITY) s += part_o[w][c] * expf(part_m[w] - M);
    out_row[c] = s * inv;
  }
  __syncthreads();
  const int half = p.rope_dim / 2, off = dim - p.rope_dim;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    RotatePair(out_row[off + 2 * j], out_row[off + 2 * j + 1], pos, p.inv_freq[j], true);
  }
  __syncthreads();
  float* orow = p.out + (t * p.heads + h) * dim;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) orow[c] = out_row[c];
}

}  // namespace

void LaunchSparseAttention(const SparseAttentionParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  if (p.dim > 512) std::abort();
  SparseAttentionKernel<<<static_cast<unsigned>(p.meta.n * p.heads), kWarps * 32, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
