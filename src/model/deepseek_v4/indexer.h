// Lightning Indexer (spec §2.7): scores every visible compressed entry of a CSA layer for a query,
// score[w] = Σ_h weight_h · relu(q_h · K[w]) / sqrt(index_head_dim), and keeps the top
// min(index_topk, visible) entries. Ties go to the lower entry index (deterministic).
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/state.h"

namespace dsinfer::model::deepseek_v4 {

// q: [n_heads, head_dim] (RoPE applied), head_weights: [n_heads] (already scaled by n_heads^-0.5),
// keys: the index keys' rows (>= visible, unpacked); visible: number of leading entries the query
// may see.
//
// fp4_blocks (the FP8 cache: queries and keys FP4 values, one power-of-two scale per 32-column
// block of each): each head's q · K is the sum, in block order, of its 32-column blocks' sums, each
// block's sum taken exactly and rounded once to fp32 (BlockExactDot). For FP4 values a block's sum
// is exact in fp32 in any order (its products are multiples of 2^-2 times one power of two, at most
// 36 times it, 32 of them: 13 significant bits), so the CUDA kernels' fmaf chains per block and
// their tensor-core chains (mma k16 steps) compute the same bits. (While the two blocks' scales
// multiply to at least 2^-147, i.e. unless both blocks' largest values are below about 2^-60:
// below that the sums reach fp32's subnormal range and the paths may round differently.)
std::vector<int32_t> IndexerTopK(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, int top_k, bool fp4_blocks = false);
// The scores IndexerTopK ranks: score[w] = the heads' terms
// (max(q_h · K[w], 0) * head_dim^-0.5) * head_weights[h] summed in backend/indexer_head_sum.h's
// tree (n_heads <= 64), w < visible.
std::vector<float> IndexerScores(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, bool fp4_blocks);
// The blocks of fp4_blocks: sum over blocks of `block` columns in order (acc = acc + block sum,
// from 0) of each block's sum of products taken in double and rounded once to fp32 (the last
// block may be shorter).
float BlockExactDot(const float* a, const float* b, int n, int block);

}  // namespace dsinfer::model::deepseek_v4
