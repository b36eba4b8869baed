// The lightning indexer's score of one entry: its heads' terms (max(q_h . k, 0) * scale) * w_h
// summed in one fixed tree, shared by the CPU references (model/deepseek_v4/indexer.cc,
// model/deepseek_v41/indexer.cc) and the CUDA kernels (backend/cuda/indexer_topk_sm90.cu), so
// that both add alike by construction. Header-only for the host and the device, no CUDA headers.
//
// The tree follows the tensor-core kernel's fragments: up to 64 heads as four quarters of 16;
// within quarter q, lane row g (0..7) holds heads 16 q + g and 16 q + g + 8, and the rows combine
// pairwise as a three-step butterfly over the lanes:
//   u_g = t[16 q + g] + t[16 q + g + 8]
//   v_q = ((u_0 + u_1) + (u_2 + u_3)) + ((u_4 + u_5) + (u_6 + u_7))
//   score = (v_0 + v_1) + (v_2 + v_3)
// Heads from `heads` on count as +0 (their terms in the kernels: a zero query times a zero
// weight). A serial sum in head order (what this replaced) put a chain of 64 dependent adds a
// key on the scoring kernels' critical path; the tree also has the smaller error bound.
#pragma once

#if defined(__CUDACC__)
#define DSINFER_IDX_FN __host__ __device__ __forceinline__
#else
#define DSINFER_IDX_FN inline
#endif

namespace dsinfer::backend::indexer {

inline constexpr int kMaxHeads = 64;

// Quarter q's sum v_q (terms t[0, heads); the rest +0).
DSINFER_IDX_FN float QuarterSum(const float* t, int heads, int q) {
  float u[8];
  for (int g = 0; g < 8; ++g) {
    const int h0 = 16 * q + g, h1 = h0 + 8;
    u[g] = (h0 < heads ? t[h0] : 0.0f) + (h1 < heads ? t[h1] : 0.0f);
  }
  return ((u[0] + u[1]) + (u[2] + u[3])) + ((u[4] + u[5]) + (u[6] + u[7]));
}

// The quarters' sums folded: the last step of the tree (the kernels' cross-warp step).
DSINFER_IDX_FN float FoldQuarters(float v0, float v1, float v2, float v3) {
  return (v0 + v1) + (v2 + v3);
}

// The score of terms t[0, heads), heads <= kMaxHeads.
DSINFER_IDX_FN float HeadSum(const float* t, int heads) {
  return FoldQuarters(QuarterSum(t, heads, 0), QuarterSum(t, heads, 1), QuarterSum(t, heads, 2),
                      QuarterSum(t, heads, 3));
}

}  // namespace dsinfer::backend::indexer
