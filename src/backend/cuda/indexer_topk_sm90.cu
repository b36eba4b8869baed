#include <climits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
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

constexpr int kTileEntries = 32;  // entries per scoring block
constexpr int kHeadGroups = 8;    // warps per scoring block; heads per thread = kMaxHeads / 8
constexpr int kHpt = kMaxHeads / kHeadGroups;

size_t ScoreSmemBytes(int heads, int head_dim) {
  return (static_cast<size_t>(heads) * head_dim + kMaxHeads +
          static_cast<size_t>(kTileEntries) * (head_dim + 4) + kTileEntries * (kMaxHeads + 1)) *
         sizeof(float);
}

// Block (tile, t): scores of entries [tile*32, tile*32+32) of token t. Thread (warp g, lane e):
// entry e against heads [8g, 8g+8).
__global__ void __launch_bounds__(kTileEntries * kHeadGroups) IndexerScoreKernel(IndexerTopKParams p, int64_t cap) {
  PdlTrigger();
  PdlWait();
  extern __shared__ float smem[];
  const int64_t t = blockIdx.y;
  const int pos = p.meta.pos[t];
  const int visible = (pos + 1) / p.rate;
  const int k = min(p.topk, visible);
  const int w0 = blockIdx.x * kTileEntries;
  if (k == visible || w0 >= visible) return;
  const int H = p.heads, Dh = p.head_dim, ks = Dh + 4;
  float* q = smem;                          // [H, Dh]
  float* wts = q + H * Dh;                  // [kMaxHeads]
  float* keys = wts + kMaxHeads;            // [32, Dh + 4]
  float* pv = keys + kTileEntries * ks;     // [32, kMaxHeads + 1]
  {
    // H·Dh is a multiple of 4 (head_dim % 4 == 0): 16-byte loads, several in flight per thread.
    const float4* qs = reinterpret_cast<const float4*>(p.q + t * H * Dh);
    float4* qd = reinterpret_cast<float4*>(q);
#pragma unroll 8
    for (int i = threadIdx.x; i < H * Dh / 4; i += blockDim.x) qd[i] = qs[i];
  }
  for (int i = threadIdx.x; i < H; i += blockDim.x) wts[i] = p.weights[t * H + i];
  const float* kbase = p.keys.data + p.meta.slot[t] * p.keys.slot_stride;
  const int ne = min(kTileEntries, visible - w0);
  for (int i = threadIdx.x; i < ne * (Dh / 4); i += blockDim.x) {
    const int e = i / (Dh / 4), c = (i % (Dh / 4)) * 4;
    *reinterpret_cast<float4*>(keys + e * ks + c) =
        *reinterpret_cast<const float4*>(kbase + static_cast<int64_t>(w0 + e) * p.keys.width + c);
  }
  __syncthreads();
  const int e = threadIdx.x % 32, g = threadIdx.x / 32;
  const float softmax_scale = rsqrtf(static_cast<float>(Dh));
  if (e < ne && g * kHpt < H) {
    float acc[kHpt];
#pragma unroll
    for (int h = 0; h < kHpt; ++h) acc[h] = 0.0f;
    const float* key = keys + e * ks;
    for (int c = 0; c < Dh; c += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(key + c);
#pragma unroll
      for (int hh = 0; hh < kHpt; ++hh) {
        const int h = g * kHpt + hh;
        if (h < H) {
          const float4 qh = *reinterpret_cast<const float4*>(q + h * Dh + c);
          acc[hh] = fmaf(qh.x, kv.x, acc[hh]);
          acc[hh] = fmaf(qh.y, kv.y, acc[hh]);
          acc[hh] = fmaf(qh.z, kv.z, acc[hh]);
          acc[hh] = fmaf(qh.w, kv.w, acc[hh]);
        }
      }
    }
#pragma unroll
    for (int hh = 0; hh < kHpt; ++hh) {
      const int h = g * kHpt + hh;
      if (h < H) pv[e * (kMaxHeads + 1) + h] = (fmaxf(acc[hh], 0.0f) * softmax_scale) * wts[h];
    }
  }
  __syncthreads();
  if (threadIdx.x < ne) {
    float s = 0;
    for (int h = 0; h < H; ++h) s += pv[threadIdx.x * (kMaxHeads + 1) + h];
    p.scores[t * cap + w0 + threadIdx.x] = s;
  }
}

__global__ void __launch_bounds__(kThreads) IndexerTopKKernel(IndexerTopKParams p, int sort_cap, int64_t cap) {
  PdlTrigger();
  PdlWait();
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
  float* score = smem;                                  // [sort_cap]
  int* idx = reinterpret_cast<int*>(score + sort_cap);  // [sort_cap]
  const int n = 1 << (32 - __clz(visible - 1));  // next power of two >= visible (visible >= 2 here)
  for (int w = threadIdx.x; w < n; w += blockDim.x) {
    if (w >= visible) {
      score[w] = -INFINITY;
      idx[w] = INT_MAX;
    } else {
      score[w] = p.scores[t * cap + w];
      idx[w] = w;
    }
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

size_t SmemBytes(int cap) { return static_cast<size_t>(cap) * (sizeof(float) + sizeof(int)); }

}  // namespace

void PrepareIndexerTopK(int heads, int head_dim, int max_entries) {
  const size_t smem = SmemBytes(NextPow2(std::max(max_entries, 2)));
  if (smem > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerTopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
  const size_t ss = ScoreSmemBytes(heads, head_dim);
  if (ss > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerScoreKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(ss)));
  }
}

void LaunchIndexerTopK(const IndexerTopKParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  if (p.heads > kMaxHeads || p.head_dim % 4 != 0 || p.score_rows <= 0 || !p.scores) std::abort();
  const int cap = NextPow2(std::max(p.max_entries, 2));
  const int64_t tiles = (p.max_entries + kTileEntries - 1) / kTileEntries;
  for (int64_t c0 = 0; c0 < p.meta.n; c0 += p.score_rows) {
    // Token chunk [c0, c0 + rows): per-token results do not depend on the chunking.
    IndexerTopKParams q = p;
    const int64_t rows = std::min<int64_t>(p.score_rows, p.meta.n - c0);
    q.meta.n = rows;
    q.meta.pos += c0;
    q.meta.slot += c0;
    q.q += c0 * p.heads * p.head_dim;
    q.weights += c0 * p.heads;
    q.sel += c0 * p.topk;
    q.sel_count += c0;
    LaunchKernel(IndexerScoreKernel, dim3(dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows))), dim3(kTileEntries * kHeadGroups), ScoreSmemBytes(p.heads, p.head_dim), stream, q, p.max_entries);
    CUDA_CHECK_LAUNCH();
    LaunchKernel(IndexerTopKKernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), SmemBytes(cap), stream, q, cap, p.max_entries);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace dsinfer::backend::cuda
