#include <cooperative_groups.h>

#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sample.cuh"

namespace dsinfer::backend::cuda {

namespace {

namespace cg = cooperative_groups;

__host__ __device__ inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__host__ __device__ inline double Uniform(uint64_t seed, int32_t request, int32_t position, int64_t token) {
  uint64_t h = Mix64(seed + 0x9e3779b97f4a7c15ull);
  h = Mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(request)) << 32 | static_cast<uint32_t>(position)));
  h = Mix64(h ^ static_cast<uint64_t>(token) * 0x9e3779b97f4a7c15ull);
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

constexpr int kSampleThreads = 512;

// A row is a cluster of kSampleBlocks blocks, each scanning one contiguous part of the vocabulary
// (a few loads in flight per thread: one L2 latency instead of a serial loop over the row); block
// 0 takes the best of the blocks' bests through distributed shared memory. The tie rule (lower
// id) makes the result independent of the split.
constexpr int kSampleBlocks = 8;

__global__ void __launch_bounds__(kSampleThreads) SampleKernel(SampleParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float best_v[32];
  __shared__ int64_t best_i[32];
  const int64_t r = blockIdx.x / kSampleBlocks;
  const int rank = static_cast<int>(blockIdx.x % kSampleBlocks);
  const float* lg = p.logits + r * p.vocab;
  const int32_t req = p.request ? p.request[r] : 0;
  const int32_t pos = p.position ? p.position[r] : static_cast<int32_t>(r);
  float bv = -INFINITY;
  int64_t bi = INT64_MAX;
  // Argmax with ties to the lower id: the same result in any visiting order.
  auto consider = [&](float v, int64_t i) {
    if (p.temperature > 0) {
      const double u = Uniform(p.seed, req, pos, i);
      v = v / p.temperature - static_cast<float>(log(-log(u)));
    }
    if (v > bv || (v == bv && i < bi)) {
      bv = v;
      bi = i;
    }
  };
  if (p.vocab % 4 == 0 && (reinterpret_cast<uintptr_t>(lg) & 15) == 0) {
    // 16-byte loads, kU per thread in flight (the row was just written: an L2 latency each).
    constexpr int kU = 4;
    const float4* lg4 = reinterpret_cast<const float4*>(lg);
    const int64_t n4 = p.vocab / 4, per = (n4 + kSampleBlocks - 1) / kSampleBlocks;
    const int64_t lo = rank * per, hi = min(n4, lo + per);
    for (int64_t b = lo + threadIdx.x; b < hi; b += static_cast<int64_t>(blockDim.x) * kU) {
      float4 q[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t i4 = b + static_cast<int64_t>(u) * blockDim.x;
        q[u] = i4 < hi ? lg4[i4] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t i4 = b + static_cast<int64_t>(u) * blockDim.x;
        if (i4 >= hi) break;
        consider(q[u].x, 4 * i4);
        consider(q[u].y, 4 * i4 + 1);
        consider(q[u].z, 4 * i4 + 2);
        consider(q[u].w, 4 * i4 + 3);
      }
    }
  } else {
    const int64_t per = (p.vocab + kSampleBlocks - 1) / kSampleBlocks;
    const int64_t hi = min(p.vocab, (rank + 1) * per);
    for (int64_t i = rank * per + threadIdx.x; i < hi; i += blockDim.x) consider(lg[i], i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  if (threadIdx.x % 32 == 0) {
    best_v[threadIdx.x / 32] = bv;
    best_i[threadIdx.x / 32] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      if (best_v[w] > bv || (best_v[w] == bv && best_i[w] < bi)) {
        bv = best_v[w];
        bi = best_i[w];
      }
    }
    best_v[0] = bv;
    best_i[0] = bi;
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's best is in its best_v[0] / best_i[0]
  if (rank == 0 && threadIdx.x == 0) {
    for (int b = 1; b < kSampleBlocks; ++b) {
      const float ov = *cluster.map_shared_rank(&best_v[0], b);
      const int64_t oi = *cluster.map_shared_rank(&best_i[0], b);
      if (ov > bv || (ov == bv && oi < bi)) {
        bv = ov;
        bi = oi;
      }
    }
    p.out[r] = static_cast<int32_t>(bi == INT64_MAX ? 0 : bi);
  }
  cluster.sync();  // block 0 has read the others' bests
}

}  // namespace

void LaunchSample(const SampleParams& p, StreamHandle stream) {
  if (p.rows <= 0) return;
  LaunchKernelClustered(SampleKernel, dim3(static_cast<unsigned>(p.rows * kSampleBlocks)),
                        dim3(kSampleThreads), 0, stream, kSampleBlocks, p);
  CUDA_CHECK_LAUNCH();
}

double SampleUniformHost(uint64_t seed, int32_t request, int32_t position, int64_t token) {
  return Uniform(seed, request, position, token);
}

}  // namespace dsinfer::backend::cuda
