#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/gemm.h"

namespace dsinfer::model::deepseek_v4 {

std::vector<int32_t> IndexerTopK(const float* q, const float* head_weights, int n_heads,
                                 int head_dim, const std::vector<const float*>& keys,
                                 int64_t visible, int top_k) {
  const int64_t k = std::min<int64_t>(top_k, visible);
  std::vector<int32_t> idx(static_cast<size_t>(visible));
  std::iota(idx.begin(), idx.end(), 0);
  if (k == visible) return idx;  // every visible entry is selected; scores cannot change that
  const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  std::vector<float> score(static_cast<size_t>(visible));
  for (int64_t w = 0; w < visible; ++w) {
    float s = 0;
    for (int h = 0; h < n_heads; ++h) {
      const float dot = backend::cpu::Dot(q + h * head_dim, keys[w], head_dim);
      s += (std::max(dot, 0.0f) * softmax_scale) * head_weights[h];
    }
    score[w] = s;
  }
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace dsinfer::model::deepseek_v4
