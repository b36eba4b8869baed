#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/gemm.h"
#include "backend/quant_codec.h"
#include "backend/softmax_fold.h"

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
    for (int64_t i = 0; i < d; ++i) o[i] = std::fma(p, k[i], o[i]);
  }
}

void AttendHeadBf16(const float* q, const std::vector<const float*>& keys, int64_t d, float scale,
                    float sink, float* o) {
  namespace sm = softmax;
  auto bf16 = [](float v) { return qc::Bf16ToFloat(qc::FloatToBf16(v)); };
  std::vector<float> qr(q, q + d), pv(static_cast<size_t>(d));
  for (float& v : qr) v = bf16(v);
  const int64_t n = static_cast<int64_t>(keys.size());
  float m_run = -INFINITY, l_run = 0.0f, e[sm::kChunk];
  std::fill(o, o + d, 0.0f);
  for (int64_t c0 = 0; c0 < n; c0 += sm::kChunk) {
    const int64_t len = std::min<int64_t>(sm::kChunk, n - c0);
    float mc = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      e[j] = Dot(qr.data(), keys[c0 + j], d) * scale;
      mc = std::max(mc, e[j]);
    }
    float sum = 0.0f;
    std::fill(pv.begin(), pv.end(), 0.0f);
    for (int64_t j = 0; j < len; ++j) {
      e[j] = std::exp(e[j] - mc);
      sum += e[j];
      const float p = bf16(e[j]);
      const float* k = keys[c0 + j];
      for (int64_t i = 0; i < d; ++i) pv[i] = std::fma(p, k[i], pv[i]);
    }
    float m_new, a, b;
    sm::FoldScales(m_run, mc, &m_new, &a, &b);
    l_run = sm::Fold(l_run, sum, a, b);
    m_run = m_new;
    for (int64_t i = 0; i < d; ++i) o[i] = sm::Fold(o[i], pv[i], a, b);
  }
  const float f = sm::OutFactor(m_run, l_run, sink);
  for (int64_t i = 0; i < d; ++i) o[i] *= f;
}

}  // namespace dsinfer::backend::cpu
