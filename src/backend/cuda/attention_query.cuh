// What the sparse attention kernels (attention_sparse_sm90.cu, attention_sparse_tc_sm90.cu) share:
// the query load — one head's query row spread over a warp, lane l holding elements
// 4l + 128v + {0..3} (v < 4), with the per-head RMSNorm (no weight) and RoPE applied when the
// params ask for them — and a row's key list, so that both kernels read the same query bits and
// the same keys in the same order.
#pragma once

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/packed_row.cuh"

namespace dsinfer::backend::cuda {

inline constexpr int kQueryPerLane = 16;  // dim <= 512

// Key j of query row t, as both kernels list a row's keys: its window (n_win positions ending at
// pos: this call's rows from seg_start on, earlier ones in the sequence's ring `window`), then its
// compressed entries (the indexer's selection, or every entry in order).
__device__ __forceinline__ const float* KeyRowPtr(const SparseAttentionParams& p, int64_t t, int j,
                                                  int pos, int n_win, int slot, int seg_start,
                                                  int seg_begin, const float* window) {
  if (j < n_win) {
    const int s = pos - n_win + 1 + j;
    return s >= seg_start
               ? p.kv + (static_cast<int64_t>(seg_begin) + s - seg_start) * p.kv_row_floats()
               : window + (s % p.window.cap) * p.window.width;
  }
  const int e = p.sel ? p.sel[t * p.sel_stride + (j - n_win)] : j - n_win;
  return p.comp.Entry(slot, e);
}

// Values c .. c + 3 (c % 4 == 0) of a K=V row: fp32, or (kPacked) a packed row of p.kv_format.
// The CUDA-core kernel instantiates both (a packed branch costs the fp32 path registers).
template <bool kPacked>
__device__ __forceinline__ float4 LoadKey4(const SparseAttentionParams& p, const float* row,
                                           int c) {
  if constexpr (kPacked) return PackedLoad4(p.kv_format, row, c);
  return __ldg(reinterpret_cast<const float4*>(row + c));
}

// The RoPE frequencies of the lane's query elements (0 for elements without RoPE): constant
// weights, so a kernel may load them before its grid-dependency wait.
__device__ __forceinline__ void QueryRopeFreqs(const SparseAttentionParams& p,
                                               float (&freq)[kQueryPerLane / 2]) {
  const int lane = threadIdx.x % 32, roff = p.dim - p.rope_dim;
#pragma unroll
  for (int v = 0; v < kQueryPerLane / 4; ++v)
#pragma unroll
    for (int i = 0; i < 4; i += 2) {
      const int c = 4 * lane + 128 * v + i;
      freq[2 * v + i / 2] = (p.q_norm_eps >= 0.0f || p.q_rope) && c >= roff && c < p.dim
                                ? p.inv_freq[(c - roff) / 2]
                                : 0.0f;
    }
}

// The tensor-core kernels' RoPE table (RopeTable, once per block: the row kernel's 64 heads each
// computing it were a fifth of its instructions, ncu, session 43): rope_dim <= 2 kMaxRopePairs.
inline constexpr int kMaxRopePairs = 64;

// Row `qrow` of a query into q (zeros past dim), with its per-head RMSNorm and RoPE when the
// params ask for them; cos_sin(k, j, &c, &s) gives the (cos, sin) of rope pair j, the lane's k-th
// (k < kQueryPerLane / 2). present false: a padding head (zeros, no norm).
template <class CosSin>
__device__ __forceinline__ void LoadQueryWith(const SparseAttentionParams& p, const float* qrow,
                                              bool present, float (&q)[kQueryPerLane],
                                              CosSin cos_sin) {
  const int lane = threadIdx.x % 32, dim = p.dim;
#pragma unroll
  for (int v = 0; v < kQueryPerLane / 4; ++v) {
    const int c = 4 * lane + 128 * v;
    const float4 a =
        present && c < dim ? *reinterpret_cast<const float4*>(qrow + c) : make_float4(0, 0, 0, 0);
    q[4 * v] = a.x;
    q[4 * v + 1] = a.y;
    q[4 * v + 2] = a.z;
    q[4 * v + 3] = a.w;
  }
  if (p.q_norm_eps >= 0.0f && present) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kQueryPerLane; ++i) ss = fmaf(q[i], q[i], ss);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + p.q_norm_eps);
#pragma unroll
    for (int i = 0; i < kQueryPerLane; ++i) q[i] *= scale;
  }
  if (p.q_norm_eps >= 0.0f || p.q_rope) {
    const int roff = dim - p.rope_dim;
#pragma unroll
    for (int v = 0; v < kQueryPerLane / 4; ++v) {
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        const int c = 4 * lane + 128 * v + i;
        if (c >= roff && c < dim) {
          float cs, sn;
          cos_sin(2 * v + i / 2, (c - roff) / 2, &cs, &sn);
          RotateWith(q[4 * v + i], q[4 * v + i + 1], cs, sn, false);
        }
      }
    }
  }
}

// LoadQueryWith at position pos, each pair's (cos, sin) computed from the lane's frequencies
// (QueryRopeFreqs).
__device__ __forceinline__ void LoadQuery(const SparseAttentionParams& p, const float* qrow,
                                          bool present, int pos,
                                          const float (&freq)[kQueryPerLane / 2],
                                          float (&q)[kQueryPerLane]) {
  LoadQueryWith(p, qrow, present, q,
                [&](int k, int, float* c, float* s) { RopeCosSin(pos, freq[k], c, s); });
}

}  // namespace dsinfer::backend::cuda
