#include "speculative/draft_length.h"

#include <algorithm>

namespace dsinfer::speculative {

namespace {
constexpr double kDecay = 0.8;  // per verify step: about the last five steps count
}  // namespace

int DraftLength::Next(const StepCostModel* cost, int64_t batch) const {
  if (!adaptive_ || max_ < 1) return max_;
  const double a = acceptance();
  if (cost != nullptr && cost->ready()) {
    int best = 0;
    double best_cost = cost->SequenceCost(0, batch), tokens = 1, power = 1;
    for (int k = 1; k <= max_; ++k) {
      power *= a;
      tokens += power;
      const double c = cost->SequenceCost(k, batch) / tokens;
      if (c < best_cost) {
        best_cost = c;
        best = k;
      }
    }
    return best == 0 && skipped_ >= kProbeEvery ? 1 : best;
  }
  if (max_ == 1) return 1;
  int k = 1;
  double gain = a;
  while (k < max_ && gain * a >= min_gain_) {
    gain *= a;
    ++k;
  }
  return k;
}

int DraftLength::FromSurvival(const std::vector<float>& accept_prob, const StepCostModel* cost,
                              int64_t batch) const {
  const int n = std::min(max_, static_cast<int>(accept_prob.size()));
  if (!adaptive_ || n < 1) return n;
  if (cost != nullptr && cost->ready()) {
    int best = 0;
    double best_cost = cost->SequenceCost(0, batch), tokens = 1, survival = 1;
    for (int k = 1; k <= n; ++k) {
      survival *= accept_prob[k - 1];
      tokens += survival;
      // The drafts' own cost is sunk: only the rows they add to the step count.
      const double c = (cost->SequenceCost(k, batch) - cost->per_draft() * k) / tokens;
      if (c < best_cost) {
        best_cost = c;
        best = k;
      }
    }
    return best;
  }
  int k = 1;
  double survival = accept_prob[0];
  while (k < n && survival * accept_prob[k] >= min_gain_) survival *= accept_prob[k++];
  return k;
}

void DraftLength::Observe(int drafted, int accepted) {
  if (drafted <= 0) return;
  skipped_ = 0;
  accepted_ = accepted_ * kDecay + accepted;
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1 : 0);
}

}  // namespace dsinfer::speculative
