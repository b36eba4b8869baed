#include "speculative/draft_length.h"

#include <algorithm>

namespace dsinfer::speculative {

namespace {

constexpr double kDecay = 0.8;  // per verify step: about the last five steps count

// Draft j (0-based) is accepted with probability p[j] given the ones before it. With a fitted cost
// model: the k in [0, n] with the least expected time per token, cost(k) / (1 + S_1 + ... + S_k),
// S_k = p[0] ... p[k-1] (`paid`: the drafts' own cost is sunk, only the rows they add count).
int CheapestLength(const std::vector<double>& p, int n, const StepCostModel& cost, int64_t batch,
                   bool paid) {
  int best = 0;
  double best_cost = cost.SequenceCost(0, batch), tokens = 1, survival = 1;
  for (int k = 1; k <= n; ++k) {
    survival *= p[k - 1];
    tokens += survival;
    const double c = (cost.SequenceCost(k, batch) - (paid ? cost.per_draft() * k : 0.0)) / tokens;
    if (c < best_cost) {
      best_cost = c;
      best = k;
    }
  }
  return best;
}

// Before the model has data: the drafts while their survival is at least min_gain, at least one.
int ThresholdLength(const std::vector<double>& p, int n, double min_gain) {
  int k = 1;
  double survival = p[0];
  while (k < n && survival * p[k] >= min_gain) survival *= p[k++];
  return k;
}

}  // namespace

int DraftLength::Next(const StepCostModel* cost, int64_t batch) const {
  if (!adaptive_ || max_ < 1) return max_;
  const std::vector<double> p(static_cast<size_t>(max_), acceptance());
  if (cost != nullptr && cost->ready()) {
    const int best = CheapestLength(p, max_, *cost, batch, /*paid=*/false);
    return best == 0 && skipped_ >= kProbeEvery ? 1 : best;
  }
  return ThresholdLength(p, max_, min_gain_);
}

int DraftLength::FromSurvival(const std::vector<float>& accept_prob, const StepCostModel* cost,
                              int64_t batch) {
  const int n = std::min(max_, static_cast<int>(accept_prob.size()));
  if (!adaptive_ || n < 1) return n;
  const std::vector<double> p(accept_prob.begin(), accept_prob.end());
  const int k = cost != nullptr && cost->ready() ? CheapestLength(p, n, *cost, batch, /*paid=*/true)
                                                 : ThresholdLength(p, n, min_gain_);
  if (k == 0) Observe(1, 0);  // a block doubted from its first draft: a rejection
  return k;
}

void DraftLength::Observe(int drafted, int accepted) {
  if (drafted <= 0) return;
  skipped_ = 0;
  accepted_ = accepted_ * kDecay + accepted;
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1 : 0);
}

}  // namespace dsinfer::speculative
