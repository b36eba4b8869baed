#include "speculative/draft_length.h"

namespace dsinfer::speculative {

namespace {
constexpr double kDecay = 0.8;  // per verify step: about the last five steps count
}  // namespace

int DraftLength::Next() const {
  if (!adaptive_ || max_ <= 1) return max_;
  const double a = acceptance();
  int k = 1;
  double gain = a;
  while (k < max_ && gain * a >= min_gain_) {
    gain *= a;
    ++k;
  }
  return k;
}

void DraftLength::Observe(int drafted, int accepted) {
  if (drafted <= 0) return;
  accepted_ = accepted_ * kDecay + accepted;
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1 : 0);
}

}  // namespace dsinfer::speculative
