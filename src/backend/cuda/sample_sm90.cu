#include <cooperative_groups.h>

#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sample.cuh"

// Compiled with -fmad=false (CMakeLists.txt): the draw's arithmetic rounds as the CPU sampler's.

namespace dsinfer::backend::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

struct SampleShared {
  unsigned long long hist[256];
  unsigned long long warp_u64[kWarps];
  float warp_f[kWarps];
  long long warp_i[kWarps];
  unsigned long long bcast_u64[2];
  int bcast_i;
  int top_count;
  uint64_t top_key[kMaxTopLogprobs];
  int32_t top_id[kMaxTopLogprobs];
};

// Block-wide sum of an integer (any order: exact).
__device__ uint64_t BlockSum(uint64_t v, SampleShared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // warp_u64 free (an earlier reduction may still be reading it)
  if (threadIdx.x % 32 == 0) sh.warp_u64[threadIdx.x / 32] = v;
  __syncthreads();
  uint64_t s = 0;
  for (int w = 0; w < kWarps; ++w) s += sh.warp_u64[w];
  return s;
}

// Block-wide max of a float (max is exact in any order).
__device__ float BlockMax(float v, SampleShared& sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.warp_f[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, sh.warp_f[w]);
  return m;
}

// Warp-wide argmax (value, id), ties to the lower id: every lane ends with the warp's best.
__device__ void WarpArgmax(float& bv, int64_t& bi) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
}

// Block-wide argmax, ties to the lower id (the same in any visiting order); returns the id.
__device__ int64_t BlockArgmax(float bv, int64_t bi, SampleShared& sh) {
  WarpArgmax(bv, bi);
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    sh.warp_f[threadIdx.x / 32] = bv;
    sh.warp_i[threadIdx.x / 32] = bi;
  }
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    if (sh.warp_f[w] > bv || (sh.warp_f[w] == bv && sh.warp_i[w] < bi)) {
      bv = sh.warp_f[w];
      bi = sh.warp_i[w];
    }
  }
  return bi;
}

// Exclusive prefix sum of one integer per thread, in thread order.
__device__ uint64_t BlockExclusiveScan(uint64_t v, SampleShared& sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  __syncthreads();
  if (lane == 31) sh.warp_u64[warp] = incl;
  __syncthreads();
  uint64_t base = 0;
  for (int w = 0; w < warp; ++w) base += sh.warp_u64[w];
  return base + incl - v;
}

// The largest key t among the valid elements such that the weight of the valid elements with
// key >= t reaches `need` (need >= 1, and the valid total reaches it): 8 passes of 8-bit digits
// from the top, each a histogram of weights among the elements that match the digits chosen so
// far. kw(i, key, weight) -> valid. Count selection is weight 1 (unit_weights). The histogram
// adds are warp-aggregated: at the top levels most elements share a digit (logits lie in a narrow
// range), and per-lane shared-memory atomics on that one bin serialized (1.6 ms of a 3 ms decode
// step at batch 1 with top-k 50); lanes with the same digit now add once, with their weights
// summed exactly (16-bit pieces through __reduce_add_sync).
template <typename KeyWeight>
__device__ uint64_t RadixSelect(int64_t n, const KeyWeight& kw, uint64_t need, bool unit_weights,
                                SampleShared& sh) {
  uint64_t prefix = 0, above = 0;
  const int64_t rounds = (n + blockDim.x - 1) / blockDim.x;  // the same for every thread
  for (int level = 7; level >= 0; --level) {
    const int shift = level * 8;
    const uint64_t hi_mask = level == 7 ? 0 : (~uint64_t{0} << (shift + 8));
    __syncthreads();  // the last level's histogram has been read
    for (int d = threadIdx.x; d < 256; d += blockDim.x) sh.hist[d] = 0;
    __syncthreads();
    for (int64_t round = 0; round < rounds; ++round) {
      const int64_t i = round * blockDim.x + threadIdx.x;
      uint64_t key = 0, w = 0;
      const bool take = i < n && kw(i, key, w) && w != 0 && (key & hi_mask) == prefix;
      const unsigned digit = take ? static_cast<unsigned>((key >> shift) & 255) : 256u;
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (!take) continue;
      uint64_t sum = 0;
      if (unit_weights) {
        sum = static_cast<uint64_t>(__popc(peers));
      } else {
        for (int part = 0; part < 4; ++part) {
          const unsigned piece = static_cast<unsigned>(w >> (16 * part)) & 0xffffu;
          sum += static_cast<uint64_t>(__reduce_add_sync(peers, piece)) << (16 * part);
        }
      }
      if (static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1)
        atomicAdd(&sh.hist[digit], static_cast<unsigned long long>(sum));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      uint64_t s = 0;  // lane l holds digits 255 - 8l ... 248 - 8l
      for (int j = 0; j < 8; ++j) s += sh.hist[255 - 8 * lane - j];
      uint64_t incl = s;
      for (int o = 1; o < 32; o <<= 1) {
        const uint64_t t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
      }
      const unsigned hit = __ballot_sync(0xffffffffu, above + incl >= need);
      if (hit != 0 && lane == __ffs(hit) - 1) {
        uint64_t acc = above + incl - s;
        int digit = 248 - 8 * lane;
        for (int j = 0; j < 8; ++j) {
          const int d = 255 - 8 * lane - j;
          if (acc + sh.hist[d] >= need) {
            digit = d;
            break;
          }
          acc += sh.hist[d];
        }
        sh.bcast_i = digit;
        sh.bcast_u64[0] = acc;
      }
    }
    __syncthreads();
    prefix |= static_cast<uint64_t>(sh.bcast_i) << shift;
    above = sh.bcast_u64[0];
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads) SampleRowsKernel(SampleRowsParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ SampleShared sh;
  const int64_t r = blockIdx.x, V = p.vocab;
  SampleRow row;
  if (p.rows) {
    row = p.rows[r];
  } else {
    row.logits_row = static_cast<int32_t>(r);
    row.greedy = 1;
  }
  const float* src = p.logits + static_cast<int64_t>(row.logits_row) * V;
  const int shift = SampleFixedShift(V);
  int64_t pick = 0;
  if (p.rows && row.forced >= 0) {
    pick = row.forced;  // scoring a given token: no draw (block-uniform branch)
  } else {
    const float* x = src;
    if (p.rows) {  // x = the processed row (mask, edits, temperature) in scratch
      float* xs = p.scratch + r * V;
      const uint64_t* mask = row.mask_word >= 0 ? p.masks + row.mask_word : nullptr;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        float v = src[i];
        if (mask && !((mask[i >> 6] >> (i & 63)) & 1)) v = -INFINITY;
        xs[i] = v;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < row.edit_count; e += blockDim.x) {
        const SampleEdit ed = p.edits[row.edit_begin + e];
        xs[ed.id] = ApplySampleEdit(xs[ed.id], ed);
      }
      __syncthreads();
      if (!row.greedy) {
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x) xs[i] = xs[i] * row.inv_temperature;
        __syncthreads();
      }
      x = xs;
    }
    // The argmax: the greedy pick, and the draw's fallback when no candidate has weight.
    float bv = -INFINITY;
    int64_t bi = INT64_MAX;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float v = x[i];
      if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
      }
    }
    pick = BlockArgmax(bv, bi, sh);
    if (!row.greedy) {
      const float m = x[pick];
      auto weight = [&](int64_t i) -> uint64_t {
        return static_cast<uint64_t>(SampleFixed(SampleExp(x[i] - m), shift));
      };
      const bool use_k = row.top_k > 0, use_p = row.top_p < 1.0f;
      uint64_t kth = 0, pth = 0;  // the smallest key kept by top-k / top-p
      if (use_k) {
        kth = RadixSelect(
            V,
            [&](int64_t i, uint64_t& key, uint64_t& w) {
              key = SampleKey(x[i], static_cast<int32_t>(i));
              w = 1;
              return true;
            },
            static_cast<uint64_t>(row.top_k), /*unit_weights=*/true, sh);
      }
      if (use_p) {
        uint64_t part = 0;
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
          if (!use_k || SampleKey(x[i], static_cast<int32_t>(i)) >= kth) part += weight(i);
        }
        const uint64_t total = BlockSum(part, sh);
        const uint64_t need =
            static_cast<uint64_t>(SampleTopPThreshold(row.top_p, static_cast<int64_t>(total)));
        pth = RadixSelect(
            V,
            [&](int64_t i, uint64_t& key, uint64_t& w) {
              key = SampleKey(x[i], static_cast<int32_t>(i));
              if (use_k && key < kth) return false;
              w = weight(i);
              return true;
            },
            need, /*unit_weights=*/false, sh);
      }
      auto kept = [&](int64_t i) -> uint64_t {
        const uint64_t key = SampleKey(x[i], static_cast<int32_t>(i));
        if ((use_k && key < kth) || (use_p && key < pth)) return 0;
        const float w = SampleExp(x[i] - m);
        if (row.min_p > 0.0f && !(w >= row.min_p)) return 0;
        return static_cast<uint64_t>(SampleFixed(w, shift));
      };
      // The draw: the first kept id, in id order, whose running weight exceeds the target. Each
      // thread sums a contiguous segment; the segment holding the target walks it.
      const int64_t seg = (V + blockDim.x - 1) / blockDim.x;
      const int64_t lo = min(V, threadIdx.x * seg), hi = min(V, lo + seg);
      uint64_t s = 0;
      for (int64_t i = lo; i < hi; ++i) s += kept(i);
      const uint64_t total = BlockSum(s, sh);
      if (total > 0) {
        const uint64_t target = SampleTarget(row.uniform, total);
        const uint64_t excl = BlockExclusiveScan(s, sh);
        if (excl <= target && target < excl + s) {
          uint64_t cum = excl;
          for (int64_t i = lo; i < hi; ++i) {
            cum += kept(i);
            if (cum > target) {
              sh.bcast_u64[1] = static_cast<uint64_t>(i);
              break;
            }
          }
        }
        __syncthreads();
        pick = static_cast<int64_t>(sh.bcast_u64[1]);
      }
    }
  }
  if (p.rows && row.logprobs) {  // of the raw logits (the model's distribution)
    const float lm = BlockMax(
        [&] {
          float v = -INFINITY;
          for (int64_t i = threadIdx.x; i < V; i += blockDim.x) v = fmaxf(v, src[i]);
          return v;
        }(),
        sh);
    uint64_t part = 0;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      part += static_cast<uint64_t>(SampleFixed(SampleExp(src[i] - lm), shift));
    }
    const uint64_t sum = BlockSum(part, sh);
    const double lse = static_cast<double>(lm) + log(static_cast<double>(sum) * ldexp(1.0, -shift));
    if (threadIdx.x == 0)
      p.out_logprob[r] = static_cast<float>(static_cast<double>(src[pick]) - lse);
    const int k = row.top_logprobs;
    if (k > 0) {
      const uint64_t kth = RadixSelect(
          V,
          [&](int64_t i, uint64_t& key, uint64_t& w) {
            key = SampleKey(src[i], static_cast<int32_t>(i));
            w = 1;
            return true;
          },
          static_cast<uint64_t>(k), /*unit_weights=*/true, sh);
      if (threadIdx.x == 0) sh.top_count = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const uint64_t key = SampleKey(src[i], static_cast<int32_t>(i));
        if (key >= kth) {
          const int slot = atomicAdd(&sh.top_count, 1);
          sh.top_key[slot] = key;
          sh.top_id[slot] = static_cast<int32_t>(i);
        }
      }
      __syncthreads();
      if (threadIdx.x == 0) {  // k <= 20 keys, distinct: insertion sort, largest first
        for (int a = 1; a < k; ++a) {
          for (int b = a; b > 0 && sh.top_key[b] > sh.top_key[b - 1]; --b) {
            const uint64_t tk = sh.top_key[b];
            sh.top_key[b] = sh.top_key[b - 1];
            sh.top_key[b - 1] = tk;
            const int32_t ti = sh.top_id[b];
            sh.top_id[b] = sh.top_id[b - 1];
            sh.top_id[b - 1] = ti;
          }
        }
        for (int a = 0; a < k; ++a) {
          p.out_top_id[r * kMaxTopLogprobs + a] = sh.top_id[a];
          p.out_top_logprob[r * kMaxTopLogprobs + a] =
              static_cast<float>(static_cast<double>(src[sh.top_id[a]]) - lse);
        }
      }
    }
  }
  if (threadIdx.x == 0) p.out_id[r] = static_cast<int32_t>(pick);
}

// The plain greedy pick (argmax, ties to the lower id) of a row on a cluster of kGreedyBlocks
// blocks: each scans one contiguous part of the row with 16-byte loads, kGreedyLoads in flight per
// thread, and block 0 takes the best of the blocks' bests through distributed shared memory. The
// tie rule makes the result independent of the split.
constexpr int kGreedyBlocks = 8;
constexpr int kGreedyThreads = 512;
constexpr int kGreedyLoads = 4;

__global__ void __launch_bounds__(kGreedyThreads) GreedyRowsKernel(SampleRowsParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float best_v[kGreedyThreads / 32];
  __shared__ int64_t best_i[kGreedyThreads / 32];
  namespace cg = cooperative_groups;
  const int64_t r = blockIdx.x / kGreedyBlocks;
  const int rank = static_cast<int>(blockIdx.x % kGreedyBlocks);
  const int64_t row = p.rows ? p.rows[r].logits_row : r;
  const float* lg = p.logits + row * p.vocab;
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  auto consider = [&](float v, int64_t i) {
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  };
  if (p.vocab % 4 == 0 && (reinterpret_cast<uintptr_t>(lg) & 15) == 0) {
    const float4* lg4 = reinterpret_cast<const float4*>(lg);
    const int64_t n4 = p.vocab / 4, per = (n4 + kGreedyBlocks - 1) / kGreedyBlocks;
    const int64_t lo = rank * per, hi = min(n4, lo + per);
    for (int64_t b = lo + threadIdx.x; b < hi;
         b += static_cast<int64_t>(blockDim.x) * kGreedyLoads) {
      float4 q[kGreedyLoads];
#pragma unroll
      for (int u = 0; u < kGreedyLoads; ++u) {
        const int64_t i4 = b + static_cast<int64_t>(u) * blockDim.x;
        q[u] = i4 < hi ? lg4[i4] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < kGreedyLoads; ++u) {
        const int64_t i4 = b + static_cast<int64_t>(u) * blockDim.x;
        if (i4 >= hi) break;
        consider(q[u].x, 4 * i4);
        consider(q[u].y, 4 * i4 + 1);
        consider(q[u].z, 4 * i4 + 2);
        consider(q[u].w, 4 * i4 + 3);
      }
    }
  } else {
    const int64_t per = (p.vocab + kGreedyBlocks - 1) / kGreedyBlocks;
    const int64_t hi = min(p.vocab, (rank + 1) * per);
    for (int64_t i = rank * per + threadIdx.x; i < hi; i += blockDim.x) consider(lg[i], i);
  }
  WarpArgmax(bv, bi);
  if (threadIdx.x % 32 == 0) {
    best_v[threadIdx.x / 32] = bv;
    best_i[threadIdx.x / 32] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kGreedyThreads / 32; ++w) consider(best_v[w], best_i[w]);
    best_v[0] = bv;
    best_i[0] = bi;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's best is in its best_v[0] / best_i[0]
  if (rank == 0 && threadIdx.x == 0) {
    for (int b = 1; b < kGreedyBlocks; ++b) {
      consider(*cluster.map_shared_rank(&best_v[0], b), *cluster.map_shared_rank(&best_i[0], b));
    }
    p.out_id[r] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
  }
  cluster.sync();  // block 0 has read the others' bests
}

__global__ void FeedTokensKernel(int32_t* ids, const int32_t* feed, const int32_t* source,
                                 int64_t n) {
  PdlTrigger();
  PdlWait();  // the sampling kernel wrote `source`; the upload, `ids` and `feed`
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < n && feed[r] >= 0) ids[r] = source[feed[r]];
}

}  // namespace

Status SampleRowsParams::Validate() const {
  if (logits == nullptr || out_id == nullptr || vocab <= 0 || vocab > INT32_MAX) {
    return InvalidArgument("sample: logits, out_id and a vocabulary in (0, 2^31) are required");
  }
  if (rows != nullptr && (scratch == nullptr || out_logprob == nullptr || out_top_id == nullptr ||
                          out_top_logprob == nullptr)) {
    return InvalidArgument("sample: per-row draws need scratch and the logprob outputs");
  }
  return Status::Ok();
}

void LaunchSampleRows(const SampleRowsParams& p, StreamHandle stream) {
  if (p.num_rows <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  if (p.rows == nullptr || p.plain_greedy) {
    LaunchKernelClustered(GreedyRowsKernel, dim3(static_cast<unsigned>(p.num_rows * kGreedyBlocks)),
                          dim3(kGreedyThreads), 0, stream, kGreedyBlocks, p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  LaunchKernel(SampleRowsKernel, dim3(static_cast<unsigned>(p.num_rows)), dim3(kThreads), 0, stream,
               p);
  CUDA_CHECK_LAUNCH();
}

void LaunchFeedTokens(int32_t* ids, const int32_t* feed, const int32_t* source, int64_t n,
                      StreamHandle stream) {
  if (n <= 0) return;
  constexpr int kFeedThreads = 256;
  LaunchKernel(FeedTokensKernel, dim3(static_cast<unsigned>((n + kFeedThreads - 1) / kFeedThreads)),
               dim3(kFeedThreads), 0, stream, ids, feed, source, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
