// The two-level sparse indexer of DeepSeek-V4.1 (reference `DeepseekV41Indexer` and
// `select_candidate_blocks`), for one query token against its group's index keys:
//   score[w] = Σ_h (relu(q_h · K[w]) · index_head_dim^-½) · wI_h,   w < visible = (pos+1) / ratio
// (q: FP4-simulated, RoPE'd indexer query; wI = weights_proj(x) · index_n_heads^-½).
// Level one (the candidate source layer only): block b of `block_size` entries scores the max of
// its visible entries; the block of the newest visible entry is always kept; the top `topk_blocks`
// blocks are the token's candidates. Level two (every index source): the top `index_topk` visible
// entries — inside the candidate blocks for index sources after the candidate source. Ties go to
// the lower index (our fixed rule; torch's order is unspecified). Pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::model::deepseek_v41 {

// q: [heads, head_dim], w: [heads], keys: [visible, head_dim] -> [visible]: V4's IndexerScores
// over contiguous fp32 keys (each entry's heads' terms (max(q_h · k, 0) * head_dim^-0.5) * w[h]
// summed in backend/indexer_head_sum.h's tree; heads <= 64).
std::vector<float> IndexScores(const float* q, const float* w, int heads, int head_dim,
                               const float* keys, int64_t visible);

// Candidate-block mask ([ceil(visible / block_size)], 1 = kept) of one query's scores.
std::vector<uint8_t> SelectCandidateBlocks(const std::vector<float>& scores, int topk_blocks,
                                           int block_size);

// The top-k entries (ascending indices) among `scores`, restricted to `candidates` (null: all).
std::vector<int32_t> SelectTopK(const std::vector<float>& scores, int k,
                                const std::vector<uint8_t>* candidates, int block_size);

}  // namespace dsinfer::model::deepseek_v41
