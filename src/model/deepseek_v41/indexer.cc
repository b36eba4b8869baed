#include "model/deepseek_v41/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/deepseek_v4/indexer.h"

namespace dsinfer::model::deepseek_v41 {

std::vector<float> IndexScores(const float* q, const float* w, int heads, int head_dim,
                               const float* keys, int64_t visible) {
  std::vector<const float*> rows(static_cast<size_t>(visible));
  for (int64_t e = 0; e < visible; ++e) rows[static_cast<size_t>(e)] = keys + e * head_dim;
  return deepseek_v4::IndexerScores(q, w, heads, head_dim, rows, visible, false);
}

namespace {

// Indices of the `k` largest values (ties: lower index first).
std::vector<int32_t> TopIndices(const std::vector<float>& v, const std::vector<int32_t>& among,
                                size_t k) {
  std::vector<int32_t> order = among;
  k = std::min(k, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<int64_t>(k), order.end(),
                    [&](int32_t a, int32_t b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
  order.resize(k);
  return order;
}

}  // namespace

std::vector<uint8_t> SelectCandidateBlocks(const std::vector<float>& scores, int topk_blocks,
                                           int block_size) {
  const int64_t visible = static_cast<int64_t>(scores.size());
  const int64_t blocks = (visible + block_size - 1) / block_size;
  std::vector<float> block_score(static_cast<size_t>(blocks), -INFINITY);
  for (int64_t e = 0; e < visible; ++e) {
    block_score[e / block_size] = std::max(block_score[e / block_size], scores[e]);
  }
  if (blocks > 0) block_score[blocks - 1] = INFINITY;  // the newest block is pinned in
  std::vector<int32_t> all(static_cast<size_t>(blocks));
  std::iota(all.begin(), all.end(), 0);
  std::vector<uint8_t> mask(static_cast<size_t>(blocks), 0);
  for (int32_t b : TopIndices(block_score, all, static_cast<size_t>(topk_blocks))) mask[b] = 1;
  return mask;
}

std::vector<int32_t> SelectTopK(const std::vector<float>& scores, int k,
                                const std::vector<uint8_t>* candidates, int block_size) {
  std::vector<int32_t> among;
  for (int32_t e = 0; e < static_cast<int32_t>(scores.size()); ++e) {
    if (candidates) {
      const size_t b = static_cast<size_t>(e / block_size);
      if (b >= candidates->size() || !(*candidates)[b]) continue;
    }
    among.push_back(e);
  }
  std::vector<int32_t> picked = TopIndices(scores, among, static_cast<size_t>(k));
  std::sort(picked.begin(), picked.end());
  return picked;
}

}  // namespace dsinfer::model::deepseek_v41
