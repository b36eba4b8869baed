#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/gemm.h"
#include "backend/indexer_head_sum.h"
#include "base/check.h"
#include "io/model_config.h"

namespace dsinfer::model::deepseek_v4 {

static_assert(io::kMaxIndexHeads == backend::indexer::kMaxHeads,
              "the configs' index-head limit is the score tree's");

float BlockExactDot(const float* a, const float* b, int n, int block) {
  float acc = 0.0f;
  for (int c = 0; c < n; c += block) {
    double s = 0.0;  // products of two floats are exact in double
    for (int i = c; i < std::min(n, c + block); ++i)
      s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    acc += static_cast<float>(s);
  }
  return acc;
}

std::vector<float> IndexerScores(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, bool fp4_blocks) {
  const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<float> score(static_cast<size_t>(visible));
  DSINFER_CHECK(n_heads <= backend::indexer::kMaxHeads);
  float terms[backend::indexer::kMaxHeads];
  for (int64_t w = 0; w < visible; ++w) {
    for (int h = 0; h < n_heads; ++h) {
      const float* qh = q + h * head_dim;
      const float dot = fp4_blocks ? BlockExactDot(qh, keys[w], head_dim, 32)
                                   : backend::cpu::Dot(qh, keys[w], head_dim);
      terms[h] = (std::max(dot, 0.0f) * softmax_scale) * head_weights[h];
    }
    score[w] = backend::indexer::HeadSum(terms, n_heads);
  }
  return score;
}

std::vector<int32_t> IndexerTopK(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, int top_k, bool fp4_blocks) {
  const int64_t k = std::min<int64_t>(top_k, visible);
  std::vector<int32_t> idx(static_cast<size_t>(visible));
  std::iota(idx.begin(), idx.end(), 0);
  if (k == visible) return idx;  // every visible entry is selected; scores cannot change that
  const std::vector<float> score =
      IndexerScores(q, head_weights, n_heads, head_dim, keys, visible, fp4_blocks);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace dsinfer::model::deepseek_v4
