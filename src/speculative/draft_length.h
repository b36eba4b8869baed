// Adaptive draft length: one sequence's estimate of how likely its next draft token is accepted,
// from its recent verify steps, and the number of drafts worth verifying next. Draft j is verified
// only if the ones before it were accepted, so it pays with probability a^j (a: the per-token
// acceptance rate); the controller drafts the largest k <= max with a^k >= min_gain, and at least
// one, so the estimate keeps learning.
#pragma once

#include <cstdint>

namespace dsinfer::speculative {

class DraftLength {
 public:
  DraftLength() : DraftLength(0, false) {}
  DraftLength(int max_drafts, bool adaptive, double min_gain = 0.3)
      : max_(max_drafts), adaptive_(adaptive), min_gain_(min_gain) {}

  // Drafts to propose for the next step (0 <= result <= max).
  int Next() const;
  // A verify step proposed `drafted` and accepted `accepted` of them.
  void Observe(int drafted, int accepted);
  double acceptance() const { return (accepted_ + 1.0) / (accepted_ + rejected_ + 2.0); }

 private:
  int max_;
  bool adaptive_;
  double min_gain_;
  double accepted_ = 0, rejected_ = 0;  // decayed counts of accepted drafts and first rejections
};

}  // namespace dsinfer::speculative
