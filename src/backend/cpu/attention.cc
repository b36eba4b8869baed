#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/gemm.h"

namespace dsinfer::backend::cpu {

void AttendHead(const float* q, const std::vector<const float*>& keys, int64_t d, float scale,
                float sink, float* logits, float* o) {
  const int64_t n = static_cast<int64_t>(keys.size());
  float m = sink;
  for (int64_t j = 0; j < n; ++j) {
    logits[j] = Dot(q, keys[j], d) * scale;
    m = std::max(m, logits[j]);
  }
  float den = std::exp(sink - m);
  for (int64_t j = 0; j < n; ++j) {
    logits[j] = std::exp(logits[j] - m);
    den += logits[j];
  }
  const float inv = 1.0f / den;
  std::fill(o, o + d, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = logits[j] * inv;
    const float* k = keys[j];
    for (int64_t i = 0; i < d; ++i) o[i] += p * k[i];
  }
}

}  // namespace dsinfer::backend::cpu
