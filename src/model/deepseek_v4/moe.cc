#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v4/expert_exchange.h"

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

// The router's choices: sel[t * K + k] (expert ids) with their weights (routed scaling applied).
struct Routing {
  std::vector<int32_t> sel;
  std::vector<float> weight;
};

Routing Route(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
              const int32_t* ids, int64_t n, ThreadPool* pool) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(n * E));  // [N, E] fp32 router logits
  cpu::Linear(x, n, D, w.gate.view(), E, logits.data(), pool);

  Routing r;
  r.sel.resize(static_cast<size_t>(n * K));
  r.weight.resize(static_cast<size_t>(n * K));
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
    int32_t* s = r.sel.data() + t * K;
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
      r.weight[t * K + k] = v * static_cast<float>(c.routed_scaling_factor);
    }
  }
  return r;
}

// o[0, D) += y * wt: a row's expert output into its sum (in ascending expert id, ties in k order).
inline void AddWeighted(float* o, const float* y, float wt, int64_t D) {
  for (int64_t j = 0; j < D; ++j) o[j] += y[j] * wt;
}

void AddShared(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x, int64_t n,
               float* out, ThreadPool* pool) {
  if (!w.shared || n == 0) return;
  const int64_t D = c.hidden_size;
  std::vector<float> sh(static_cast<size_t>(n * D));
  Expert(*w.shared, c, x, n, sh.data(), pool);
  for (int64_t i = 0; i < n * D; ++i) out[i] += sh[i];
}

}  // namespace

void MoeForward(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                const int32_t* ids, int64_t n, float* out, ThreadPool* pool) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const Routing r = Route(w, c, x, ids, n, pool);

  // Group rows by expert (ascending), run each expert once over its rows.
  std::vector<std::vector<int64_t>> rows(E), slots(E);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < K; ++k) {
      rows[r.sel[t * K + k]].push_back(t);
      slots[r.sel[t * K + k]].push_back(t * K + k);
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
      AddWeighted(out + rows[e][i] * D, ys.data() + i * D, r.weight[slots[e][i]], D);
    }
  }
  AddShared(w, c, x, n, out, pool);
}

Status MoeForwardParallel(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                          const int32_t* ids, int64_t n, float* out, ThreadPool* pool,
                          const MoeParallel& ep) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const distributed::ExpertPlacement& place = *ep.placement;
  const int ranks = ep.comm->size(), me = ep.comm->rank();
  DSINFER_CHECK(place.ranks() == ranks && place.experts() == E);
  Routing r;
  if (n > 0) r = Route(w, c, x, ids, n, pool);
  if (ep.load != nullptr) {
    for (int32_t e : r.sel) ++ep.load[e];
  }

  // Dispatch each pair p = t K + k to the rank the placement picks (expert_exchange.h).
  ExpertDispatch dispatch = PackExpertDispatch(place, me, r.sel.data(), n * K, K, x, D);
  DSINFER_ASSIGN_OR_RETURN(std::vector<distributed::Bytes> recv,
                           ep.comm->AllToAll(std::move(dispatch.send)));

  // Serve: the received rows grouped by expert, each expert run once over its rows; the outputs
  // go back in the order received.
  DSINFER_ASSIGN_OR_RETURN(ExpertWork work,
                           GroupExpertWork(recv, static_cast<int>(E), D, me, [&](int e) {
                             return place.Holds(me, e) && w.experts[e].w1.bytes() != 0;
                           }));
  recv.clear();
  if (ep.served != nullptr) *ep.served += work.total();
  std::vector<float> ys(work.rows.size());
  for (size_t i = 0; i < work.experts.size(); ++i) {
    const int64_t r0 = work.offsets[i], m = work.offsets[i + 1] - r0;
    Expert(w.experts[work.experts[i]], c, work.rows.data() + r0 * D, m, ys.data() + r0 * D, pool);
  }
  DSINFER_ASSIGN_OR_RETURN(std::vector<distributed::Bytes> back,
                           ep.comm->AllToAll(PackExpertReplies(work, ys.data(), D, ranks)));

  // Combine: each row's expert outputs in ascending expert id (ties in k order), as MoeForward.
  std::vector<float> y(static_cast<size_t>(n * K * D));  // [pair][D]
  DSINFER_RETURN_IF_ERROR(ScatterExpertReplies(back, dispatch, D, y.data()));
  std::fill(out, out + n * D, 0.0f);
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t t = 0; t < n; ++t) {
    std::iota(order.begin(), order.end(), t * K);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return r.sel[a] < r.sel[b]; });
    for (int64_t p : order) AddWeighted(out + t * D, y.data() + p * D, r.weight[p], D);
  }
  AddShared(w, c, x, n, out, pool);
  return Status::Ok();
}

}  // namespace dsinfer::model::deepseek_v4
