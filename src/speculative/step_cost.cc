#include "speculative/step_cost.h"

#include <algorithm>

namespace dsinfer::speculative {

namespace {
constexpr double kDecay = 0.95;  // per observation: about the last 20 steps count
}  // namespace

void StepCostModel::ObserveStep(int64_t rows, double seconds) {
  if (rows <= 0 || seconds < 0) return;
  const double r = static_cast<double>(rows);
  w_ = w_ * kDecay + 1;
  r_ = r_ * kDecay + r;
  rr_ = rr_ * kDecay + r * r;
  t_ = t_ * kDecay + seconds;
  rt_ = rt_ * kDecay + r * seconds;
  ++steps_;
}

void StepCostModel::ObserveDrafting(int64_t tokens, double seconds) {
  if (tokens <= 0 || seconds < 0) return;
  draft_s_ = draft_s_ * kDecay + seconds;
  draft_tokens_ = draft_tokens_ * kDecay + static_cast<double>(tokens);
}

void StepCostModel::Fit(double* base, double* per_row) const {
  *base = 0;
  *per_row = 0;
  if (w_ <= 0 || r_ <= 0) return;
  const double det = w_ * rr_ - r_ * r_;
  // Rows that barely vary leave the slope undetermined: then all the time is per row.
  if (det > 1e-9 * w_ * rr_) {
    *per_row = (w_ * rt_ - r_ * t_) / det;
    *base = (t_ - *per_row * r_) / w_;
  }
  if (*per_row <= 0 || *base < 0) {  // a fit outside the model's range: the simplest that is in
    *base = std::max(0.0, std::min(*base, t_ / w_));
    *per_row = std::max(0.0, (t_ - *base * w_) / r_);
  }
}

double StepCostModel::base() const {
  double b, p;
  Fit(&b, &p);
  return b;
}

double StepCostModel::per_row() const {
  double b, p;
  Fit(&b, &p);
  return p;
}

double StepCostModel::SequenceCost(int k, int64_t batch) const {
  double b, p;
  Fit(&b, &p);
  return b / static_cast<double>(std::max<int64_t>(batch, 1)) + p * (1 + k) + per_draft() * k;
}

}  // namespace dsinfer::speculative
