#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

namespace {

// out [m, D] = w2( silu(min(w1 x, L)) * clamp(w3 x, -L, L) ) for the m rows of xs.
void Expert(const ExpertWeights& e, const io::DeepseekV4Config& c, const float* xs, int64_t m,
            float* out, ThreadPool* pool) {
  const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
  std::vector<float> g(static_cast<size_t>(m * I)), u(static_cast<size_t>(m * I));
  cpu::Linear(xs, m, D, e.w1.view(), I, g.data(), pool);
  cpu::Linear(xs, m, D, e.w3.view(), I, u.data(), pool);
  const float lim = static_cast<float>(c.swiglu_limit);
  for (int64_t i = 0; i < m * I; ++i) {
    float gv = g[i], uv = u[i];
    if (lim > 0) {
      gv = std::min(gv, lim);
      uv = std::clamp(uv, -lim, lim);
    }
    g[i] = cpu::Silu(gv) * uv;
  }
  cpu::Linear(g.data(), m, I, e.w2.view(), D, out, pool);
}

float Score(const std::string& func, float logit) {
  if (func == "sqrtsoftplus") return std::sqrt(cpu::Softplus(logit));
  return cpu::Sigmoid(logit);  // "sigmoid" ("softmax" is normalized by the caller)
}

}  // namespace

void MoeForward(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                const int32_t* ids, int64_t n, float* out, ThreadPool* pool) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(n * E));  // [N, E] fp32 router logits
  cpu::Linear(x, n, D, w.gate.view(), E, logits.data(), pool);

  // Routing: expert ids and weights per token.
  std::vector<int32_t> sel(static_cast<size_t>(n * K));
  std::vector<float> weight(static_cast<size_t>(n * K));
  std::vector<float> scores(E), biased(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < n; ++t) {
    const float* lg = logits.data() + t * E;
    if (c.scoring_func == "softmax") {
      scores.assign(lg, lg + E);
      cpu::Softmax(scores.data(), E);
    } else {
      for (int64_t e = 0; e < E; ++e) scores[e] = Score(c.scoring_func, lg[e]);
    }
    int32_t* s = sel.data() + t * K;
    if (!w.tid2eid.empty()) {
      std::copy_n(w.tid2eid.data() + static_cast<int64_t>(ids[t]) * K, K, s);
    } else {
      for (int64_t e = 0; e < E; ++e) biased[e] = scores[e] + (w.bias.empty() ? 0.0f : w.bias[e]);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
        return biased[a] != biased[b] ? biased[a] > biased[b] : a < b;
      });
      std::copy_n(order.begin(), K, s);
    }
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += scores[s[k]];
    for (int64_t k = 0; k < K; ++k) {
      const float v = c.norm_topk_prob ? scores[s[k]] / (sum + 1e-20f) : scores[s[k]];
      weight[t * K + k] = v * static_cast<float>(c.routed_scaling_factor);
    }
  }

  // Group rows by expert (ascending), run each expert once over its rows.
  std::vector<std::vector<int64_t>> rows(E), slots(E);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      rows[sel[t * K + k]].push_back(t);
      slots[sel[t * K + k]].push_back(t * K + k);
    }
  }
  std::fill(out, out + n * D, 0.0f);
  std::vector<float> xs, ys;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t m = static_cast<int64_t>(rows[e].size());
    if (m == 0) continue;
    xs.resize(static_cast<size_t>(m * D));
    ys.resize(static_cast<size_t>(m * D));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + rows[e][i] * D, D, xs.data() + i * D);
    Expert(w.experts[e], c, xs.data(), m, ys.data(), pool);
    for (int64_t i = 0; i < m; ++i) {
      const float wt = weight[slots[e][i]];
      float* o = out + rows[e][i] * D;
      for (int64_t j = 0; j < D; ++j) o[j] += ys[i * D + j] * wt;
    }
  }
  if (w.shared) {
    std::vector<float> sh(static_cast<size_t>(n * D));
    Expert(*w.shared, c, x, n, sh.data(), pool);
    for (int64_t i = 0; i < n * D; ++i) out[i] += sh[i];
  }
}

}  // namespace dsinfer::model::deepseek_v4
