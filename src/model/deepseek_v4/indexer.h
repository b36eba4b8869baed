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
std::vector<int32_t> IndexerTopK(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, int top_k);

}  // namespace dsinfer::model::deepseek_v4
