#include <climits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/indexer_topk.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kMaxHeads = 64;

int NextPow2(int v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Descending by score, ascending by index on ties (a total order: indices are distinct).
__device__ __forceinline__ bool Before(float sa, int ia, float sb, int ib) {
  return sa > sb || (sa == sb && ia < ib);
}

__global__ void __launch_bounds__(kThreads) IndexerTopKKernel(IndexerTopKParams p, int sort_cap) {
  extern __shared__ float smem[];
  const int64_t t = blockIdx.x;
  const int pos = p.meta.pos[t];
  const int visible = (pos + 1) / p.rate;
  const int k = min(p.topk, visible);
  int32_t* sel = p.sel + t * p.topk;
  if (threadIdx.x == 0) p.sel_count[t] = k;
  if (k == visible) {  // every visible entry is selected; scores cannot change that
    for (int i = threadIdx.x; i < k; i += blockDim.x) sel[i] = i;
    return;
  }
  const int H = p.heads, Dh = p.head_dim;
  float* q = smem;                                  // [H, Dh]
  float* wts = q + H * Dh;                          // [H]
  float* score = wts + kMaxHeads;                   // [sort_cap]
  int* idx = reinterpret_cast<int*>(score + sort_cap);  // [sort_cap]
  for (int i = threadIdx.x; i < H * Dh; i += blockDim.x) q[i] = p.q[t * H * Dh + i];
  for (int i = threadIdx.x; i < H; i += blockDim.x) wts[i] = p.weights[t * H + i];
  __syncthreads();
  const float softmax_scale = rsqrtf(static_cast<float>(Dh));
  const float* kbase = p.keys.data + p.meta.slot[t] * p.keys.slot_stride;
  const int n = 1 << (32 - __clz(visible - 1));  // next power of two >= visible (visible >= 2 here)
  for (int w = threadIdx.x; w < n; w += blockDim.x) {
    if (w >= visible) {
      score[w] = -INFINITY;
      idx[w] = INT_MAX;
      continue;
    }
    const float* key = kbase + static_cast<int64_t>(w) * p.keys.width;
    float acc[kMaxHeads];
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h) acc[h] = 0.0f;
    for (int c = 0; c < Dh; c += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(key + c);
#pragma unroll
      for (int h = 0; h < kMaxHeads; ++h) {
        if (h < H) {
          const float* qh = q + h * Dh + c;
          acc[h] = fmaf(qh[0], kv.x, acc[h]);
          acc[h] = fmaf(qh[1], kv.y, acc[h]);
          acc[h] = fmaf(qh[2], kv.z, acc[h]);
          acc[h] = fmaf(qh[3], kv.w, acc[h]);
        }
      }
    }
    float s = 0;
#pragma unroll
    for (int h = 0; h < kMaxHeads; ++h)
      if (h < H) s += (fmaxf(acc[h], 0.0f) * softmax_scale) * wts[h];
    score[w] = s;
    idx[w] = w;
  }
  __syncthreads();
  // Bitonic sort of (score, idx) over n entries.
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int j = i ^ stride;
        if (j > i) {
          const bool up = (i & size) == 0;  // this run is sorted in "Before" order
          const bool swap = up ? Before(score[j], idx[j], score[i], idx[i])
                               : Before(score[i], idx[i], score[j], idx[j]);
          if (swap) {
            const float s = score[i]; score[i] = score[j]; score[j] = s;
            const int x = idx[i]; idx[i] = idx[j]; idx[j] = x;
          }
        }
      }
      __syncthreads();
    }
  }
  // The first k indices, sorted ascending (reuse `score` as int storage via idx tail).
  const int m = 1 << (32 - __clz(max(k, 2) - 1));
  int* keys = reinterpret_cast<int*>(score);  // scores are no longer needed
  for (int i = threadIdx.x; i < m; i += blockDim.x) keys[i] = i < k ? idx[i] : INT_MAX;
  __syncthreads();
  for (int size = 2; size <= m; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < m; i += blockDim.x) {
        const int j = i ^ stride;
        if (j > i) {
          const bool up = (i & size) == 0;
          const bool swap = up ? keys[j] < keys[i] : keys[i] < keys[j];
          if (swap) {
            const int x = keys[i]; keys[i] = keys[j]; keys[j] = x;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < k; i += blockDim.x) sel[i] = keys[i];
}

size_t SmemBytes(int heads, int head_dim, int cap) {
  return (static_cast<size_t>(heads) * head_dim + kMaxHeads) * sizeof(float) +
         static_cast<size_t>(cap) * (sizeof(float) + sizeof(int));
}

}  // namespace

void PrepareIndexerTopK(int heads, int head_dim, int max_entries) {
  const size_t smem = SmemBytes(heads, head_dim, NextPow2(std::max(max_entries, 2)));
  if (smem > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerTopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
}

void LaunchIndexerTopK(const IndexerTopKParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  if (p.heads > kMaxHeads || p.head_dim % 4 != 0) std::abort();
  const int cap = NextPow2(std::max(p.max_entries, 2));
  const size_t smem = SmemBytes(p.heads, p.head_dim, cap);
  IndexerTopKKernel<<<static_cast<unsigned>(p.meta.n), kThreads, smem, stream>>>(p, cap);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
