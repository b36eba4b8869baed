#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_combine.cuh"
#include "backend/cuda/moe_route.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMaxE = 1024;
constexpr int kMaxK = kMoeMaxK;

__device__ float SoftplusF(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

constexpr int kGroupThreads = 256;
// Pairs up to this many are grouped by one block (GroupOneBlock); more take the per-expert
// count and fill kernels. Both give the same lists.
constexpr int64_t kOneBlockPairs = 2048;

// MoeGroup's result computed by one block of kGroupThreads threads: expert counts by shared-memory
// atomics (integers: order-free), the active experts ascending with their offsets by a block
// scan, then warp 0 walks the pairs in ascending order, 32 at a time, placing each after the
// earlier pairs of its expert (lanes of one expert ranked by __match_any_sync).
// Up to 32 pairs grouped by one warp, pair i on lane i with expert e (lanes >= pairs: any e).
__device__ void GroupWarp(const MoeGroupParams& p, int e) {
  const int lane = threadIdx.x % 32;
  const bool valid = lane < p.pairs;
  if (!valid) e = -1 - lane;  // distinct dummies never match
  const unsigned peers = __match_any_sync(0xffffffffu, e);
  const bool leader = valid && (peers & ((1u << lane) - 1)) == 0;  // its expert's first pair
  const unsigned leaders = __ballot_sync(0xffffffffu, leader);
  // Pairs of lower experts, and active experts below this one.
  int below = 0, act = 0;
  for (int j = 0; j < p.pairs; ++j) {
    const int ej = __shfl_sync(0xffffffffu, e, j);
    if (ej < e) {
      ++below;
      act += (leaders >> j) & 1u;
    }
  }
  if (valid) p.pair_list[below + __popc(peers & ((1u << lane) - 1))] = lane;
  if (leader) {
    p.active[act] = e;
    p.offsets[act] = below;
    p.offsets[act + 1] = below + __popc(peers);
  }
  if (lane == 0) *p.num_active = __popc(leaders);
}

__device__ void GroupOneBlock(const MoeGroupParams& p) {
  if (p.pairs <= 32) {  // decode sizes: warp 0 alone, no barriers
    if (threadIdx.x >= 32) return;
    GroupWarp(p, threadIdx.x < p.pairs ? p.sel[threadIdx.x] : 0);
    return;
  }
  __shared__ int cnt[kMaxE], cursor[kMaxE];
  __shared__ int wsum[kGroupThreads / 32][2];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (int e = tid; e < p.E; e += kGroupThreads) cnt[e] = 0;
  __syncthreads();
  for (int64_t i = tid; i < p.pairs; i += kGroupThreads) atomicAdd(&cnt[p.sel[i]], 1);
  __syncthreads();
  // Thread tid scans experts [tid * per, (tid + 1) * per): pairs and active experts before each.
  const int per = (p.E + kGroupThreads - 1) / kGroupThreads;
  const int e0 = tid * per, e1 = min(p.E, e0 + per);
  int c = 0, a = 0;
  for (int e = e0; e < e1; ++e) {
    c += cnt[e];
    a += cnt[e] > 0;
  }
  int ci = c, ai = a;  // inclusive warp scans
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int co = __shfl_up_sync(0xffffffffu, ci, o), ao = __shfl_up_sync(0xffffffffu, ai, o);
    if (lane >= o) {
      ci += co;
      ai += ao;
    }
  }
  if (lane == 31) {
    wsum[warp][0] = ci;
    wsum[warp][1] = ai;
  }
  __syncthreads();
  int off = ci - c, act = ai - a;  // exclusive
  for (int w = 0; w < warp; ++w) {
    off += wsum[w][0];
    act += wsum[w][1];
  }
  for (int e = e0; e < e1; ++e) {
    const int ce = cnt[e];
    cursor[e] = off;
    if (ce > 0) {
      p.active[act] = e;
      p.offsets[act] = off;
      p.offsets[act + 1] = off + ce;
      ++act;
    }
    off += ce;
  }
  if (tid == kGroupThreads - 1) *p.num_active = act;
  __syncthreads();
  if (warp != 0) return;
  for (int64_t i0 = 0; i0 < p.pairs; i0 += 32) {
    const int64_t i = i0 + lane;
    const int e = i < p.pairs ? p.sel[i] : -1 - lane;  // distinct dummies never match
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0) {
      const int rank = __popc(peers & ((1u << lane) - 1));
      p.pair_list[cursor[e] + rank] = static_cast<int32_t>(i);
    }
    __syncwarp();
    if (e >= 0 && (peers >> lane) == 1u) cursor[e] += __popc(peers);  // the group's last lane
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kGroupThreads) MoeGroupOneBlockKernel(MoeGroupParams p) {
  PdlTrigger();
  PdlWait();
  GroupOneBlock(p);
}

constexpr int kRegPerLane = 8;  // biased keys per lane held in registers (E <= 256)

// Block-wide: token blockIdx.x's experts and weights (the whole block, then warp 0). Warp 0's lane
// k < K returns the token's k-th expert (-1 on other lanes and warps).
__device__ int RouteToken(const MoeRouteParams& p) {
  __shared__ float scores[kMaxE], biased[kMaxE];
  const int64_t t = blockIdx.x;
  const float* lg = p.logits + t * p.E;
  const bool softmax = p.scoring == ScoringFunc::kSoftmax;
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) {
    const float x = lg[e];
    scores[e] = p.scoring == ScoringFunc::kSqrtSoftplus ? sqrtf(SoftplusF(x))
              : p.scoring == ScoringFunc::kSigmoid      ? SigmoidF(x)
                                                        : x;
    if (!softmax) biased[e] = scores[e] + (p.bias ? p.bias[e] : 0.0f);  // the selection key
  }
  __syncthreads();
  if (threadIdx.x >= 32) return -1;  // one warp from here on (the caller syncs after)
  const int lane = threadIdx.x;
  if (p.scoring == ScoringFunc::kSoftmax) {
    if (lane == 0) {
      float m = scores[0];
      for (int e = 1; e < p.E; ++e) m = fmaxf(m, scores[e]);
      double sum = 0;
      for (int e = 0; e < p.E; ++e) {
        scores[e] = expf(scores[e] - m);
        sum += scores[e];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int e = 0; e < p.E; ++e) {
        scores[e] *= inv;
        biased[e] = scores[e] + (p.bias ? p.bias[e] : 0.0f);
      }
    }
    __syncwarp();
  }
  int mine = -1;  // lane k < K: the k-th expert
  if (p.tid2eid) {
    if (lane < p.K) mine = p.tid2eid[static_cast<int64_t>(p.ids[t]) * p.K + lane];
  } else {
    // K rounds of argmax of the biased score, ties to the lower id (the serial scan's "strictly
    // greater" rule): each lane takes the best of its experts lane, lane + 32, ... not yet
    // taken, in ascending order, then a warp butterfly under the total order (value desc, id asc)
    // leaves every lane with the same winner. Up to 256 experts the lane's keys and taken marks
    // stay in registers; more read shared memory.
    const bool in_regs = p.E <= 32 * kRegPerLane;
    float key[kRegPerLane];
#pragma unroll
    for (int j = 0; j < kRegPerLane; ++j) {
      const int e = lane + 32 * j;
      key[j] = in_regs && e < p.E ? biased[e] : 0.0f;
    }
    __shared__ unsigned char taken[kMaxE];
    if (!in_regs) {
      for (int e = lane; e < p.E; e += 32) taken[e] = 0;
      __syncwarp();
    }
    unsigned taken_mask = 0;  // bit j: expert lane + 32 j (in_regs)
    for (int k = 0; k < p.K; ++k) {
      int best = -1;
      float bv = 0;
      if (in_regs) {
#pragma unroll
        for (int j = 0; j < kRegPerLane; ++j) {
          const int e = lane + 32 * j;
          if (e < p.E && !((taken_mask >> j) & 1u) && (best < 0 || key[j] > bv)) {
            best = e;
            bv = key[j];
          }
        }
      } else {
        for (int e = lane; e < p.E; e += 32) {
          if (taken[e]) continue;
          const float v = biased[e];
          if (best < 0 || v > bv) {
            best = e;
            bv = v;
          }
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const int ob = __shfl_xor_sync(0xffffffffu, best, o);
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) {
          best = ob;
          bv = ov;
        }
      }
      if (lane == k) mine = best;
      if (in_regs) {
        if (best % 32 == lane) taken_mask |= 1u << (best / 32);
      } else {
        if (lane == 0) taken[best] = 1;
        __syncwarp();
      }
    }
  }
  // Weights: lane k's score, the sum over k in order (lane 0's chain, gathered by shuffles).
  const float sc = lane < p.K ? scores[mine] : 0.0f;
  float sum = 0;
  for (int k = 0; k < p.K; ++k) sum += __shfl_sync(0xffffffffu, sc, k);
  if (lane < p.K) {
    const float v = p.norm_topk_prob ? sc / (sum + 1e-20f) : sc;
    p.sel[t * p.K + lane] = mine;
    p.weight[t * p.K + lane] = v * p.routed_scaling_factor;
  }
  return mine;
}

// group.pairs > 0: the last block to finish its token also groups the pairs (GroupOneBlock),
// saving the grouping launches at decode sizes.
__global__ void __launch_bounds__(kGroupThreads)
    MoeRouteKernel(MoeRouteParams p, MoeGroupParams group) {
  PdlTrigger();
  PdlWait();
  const int mine = RouteToken(p);
  if (group.pairs <= 0) return;
  if (gridDim.x == 1) {  // the only token: warp 0 groups its K pairs from its registers
    if (threadIdx.x < 32) GroupWarp(group, mine);
    return;
  }
  __shared__ bool last;
  __threadfence();  // this token's sel / weight visible device-wide ...
  __syncthreads();  // ... in every thread before the count says so
  if (threadIdx.x == 0) {
    const int done = atomicAdd(group.done, 1);
    last = done == static_cast<int>(p.n) - 1;
    if (last) *group.done = 0;  // ready for the next launch (kernels on a stream do not overlap)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  GroupOneBlock(group);
}

__global__ void MoeCountKernel(MoeGroupParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ int scratch[32];
  const int e = blockIdx.x;
  int c = 0;
  for (int64_t i = threadIdx.x; i < p.pairs; i += blockDim.x) c += p.sel[i] == e;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += scratch[w];
    p.counts[e] = s;
  }
}

__global__ void MoeFillKernel(MoeGroupParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ int base_s, warp_tot[32], red[3][32];
  const int e = blockIdx.x;
  const int count = p.counts[e];
  {
    // offset = counts of lower experts, ai = active lower experts, total = active experts.
    int offset = 0, ai = 0, total_active = 0;
    for (int f = threadIdx.x; f < p.E; f += blockDim.x) {
      const int cf = p.counts[f];
      if (f < e) {
        offset += cf;
        ai += cf > 0;
      }
      total_active += cf > 0;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      offset += __shfl_xor_sync(0xffffffffu, offset, o);
      ai += __shfl_xor_sync(0xffffffffu, ai, o);
      total_active += __shfl_xor_sync(0xffffffffu, total_active, o);
    }
    if (threadIdx.x % 32 == 0) {
      red[0][threadIdx.x / 32] = offset;
      red[1][threadIdx.x / 32] = ai;
      red[2][threadIdx.x / 32] = total_active;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      offset = ai = total_active = 0;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
        offset += red[0][w];
        ai += red[1][w];
        total_active += red[2][w];
      }
      if (e == p.E - 1) *p.num_active = total_active;
      if (count > 0) {
        p.active[ai] = e;
        p.offsets[ai] = offset;
        p.offsets[ai + 1] = offset + count;
      }
      base_s = offset;
    }
  }
  __syncthreads();
  if (count == 0) return;
  int base = base_s;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  for (int64_t i0 = 0; i0 < p.pairs; i0 += blockDim.x) {
    const int64_t i = i0 + threadIdx.x;
    const bool flag = i < p.pairs && p.sel[i] == e;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_tot[warp] = __popc(ballot);
    __syncthreads();
    int before = 0;
    for (int w = 0; w < warp; ++w) before += warp_tot[w];
    if (flag) p.pair_list[base + before + __popc(ballot & ((1u << lane) - 1))] = static_cast<int32_t>(i);
    int tot = 0;
    for (int w = 0; w < nw; ++w) tot += warp_tot[w];
    base += tot;
    __syncthreads();
  }
}

__global__ void SwigluKernel(float* g, const float* u, int64_t rows, int64_t cols, int64_t ld, float lim) {
  PdlTrigger();
  PdlWait();
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    g[r * ld + c] = SwigluF(g[r * ld + c], u[r * ld + c], lim);
  }
}

__global__ void MoeCombineKernel(MoeCombineParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.y;
  int rank[kMaxK];
  MoeCombineRanks(p, t, rank);
  for (int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; d < p.D;
       d += int64_t{gridDim.x} * blockDim.x)
    p.out[t * p.D + d] = MoeCombineAt(p, t, rank, d);
}

}  // namespace

Status MoeRouteParams::Validate() const {
  if (E < 1 || E > kMaxE || K < 1 || K > kMaxK || K > E) {
    return Unimplemented("MoE routing: " + std::to_string(E) + " experts, " + std::to_string(K) +
                         " per token (the kernel takes up to " + std::to_string(kMaxE) + " and " +
                         std::to_string(kMaxK) + ")");
  }
  return Status::Ok();
}
Status MoeGroupParams::Validate() const {
  if (E < 1 || E > kMaxE) {
    return Unimplemented("MoE grouping: " + std::to_string(E) +
                         " experts (the kernel takes up to " + std::to_string(kMaxE) + ")");
  }
  return Status::Ok();
}

void LaunchMoeRoute(const MoeRouteParams& p, const MoeGroupParams* group, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  MoeGroupParams g;  // pairs = 0: no grouping in the kernel
  const bool fused = group != nullptr && group->pairs <= kOneBlockPairs && group->done != nullptr;
  if (fused) g = *group;
  LaunchKernel(MoeRouteKernel, dim3(static_cast<unsigned>(p.n)), dim3(kGroupThreads), 0, stream, p,
               g);
  CUDA_CHECK_LAUNCH();
  if (group != nullptr && !fused) LaunchMoeGroup(*group, stream);
}

void LaunchMoeGroup(const MoeGroupParams& p, StreamHandle stream) {
  if (p.pairs <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  if (p.pairs <= kOneBlockPairs) {
    LaunchKernel(MoeGroupOneBlockKernel, dim3(1), dim3(kGroupThreads), 0, stream, p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  LaunchKernel(MoeCountKernel, dim3(p.E), dim3(256), 0, stream, p);
  CUDA_CHECK_LAUNCH();
  LaunchKernel(MoeFillKernel, dim3(p.E), dim3(256), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchSwiglu(float* g, const float* u, int64_t rows, int64_t cols, int64_t ld, float limit,
                  StreamHandle stream) {
  if (rows <= 0) return;
  const int64_t blocks = std::min<int64_t>((rows * cols + 255) / 256, 4096);
  LaunchKernel(SwigluKernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, g, u, rows, cols, ld, limit);
  CUDA_CHECK_LAUNCH();
}

void LaunchMoeCombine(const MoeCombineParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>((p.D + 255) / 256, 16));
  LaunchKernel(MoeCombineKernel, dim3(dim3(bx, static_cast<unsigned>(p.n))), dim3(256), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
