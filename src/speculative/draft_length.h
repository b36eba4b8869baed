// Adaptive draft length: one sequence's estimate of how likely its next draft token is accepted,
// from its recent verify steps, and the number of drafts worth verifying next. Draft j is verified
// only if the ones before it were accepted, so it pays with probability a^j (a: the per-token
// acceptance rate), and k drafts yield E(k) = 1 + a + ... + a^k tokens in expectation.
//
// With a fitted cost model (StepCostModel: what a step, a verified row and a draft token cost on
// this engine) the controller picks the k in [0, max] with the least expected time per token,
// cost(k) / E(k): on a memory-bound GPU step rows are nearly free and long drafts pay; where rows
// or drafting cost as much as a step (a CPU, an MTP layer whose head is most of the model) it
// drafts little or nothing — then one draft every kProbeEvery steps keeps the estimate current.
// Before the model has data: the largest k <= max with a^k >= min_gain, and at least one.
#pragma once

#include <cstdint>
#include <vector>

#include "speculative/step_cost.h"

namespace dsinfer::speculative {

class DraftLength {
 public:
  DraftLength() : DraftLength(0, false) {}
  DraftLength(int max_drafts, bool adaptive, double min_gain = 0.3)
      : max_(max_drafts), adaptive_(adaptive), min_gain_(min_gain) {}

  // Drafts to propose for the next step (0 <= result <= max), for a step of `batch` sequences.
  int Next(const StepCostModel* cost = nullptr, int64_t batch = 1) const;
  // A drafter that scores its own drafts (DSpark's confidence head): accept_prob[j] is draft j's
  // acceptance probability given the ones before it, so draft j pays with the survival
  // S_j = accept_prob[0] · ... · accept_prob[j], and k drafts yield 1 + S_0 + ... + S_{k-1}. The
  // drafts are already paid for; with a fitted cost model the k in [0, min(max, drafts)] with the
  // least expected time per token; before it, the drafts while S_j >= min_gain, at least one.
  // A block worth none of its drafts counts as a rejection (Observe(1, 0)): a sequence whose
  // blocks the head keeps doubting stops drafting (but for the probes) instead of paying for
  // blocks it never verifies. Not adaptive: min(max, drafts).
  int FromSurvival(const std::vector<float>& accept_prob, const StepCostModel* cost = nullptr,
                   int64_t batch = 1);
  // A verify step proposed `drafted` and accepted `accepted` of them.
  void Observe(int drafted, int accepted);
  // A step drew this sequence's token without drafts.
  void Skipped() { ++skipped_; }

  static constexpr int kProbeEvery = 16;
  double acceptance() const { return (accepted_ + 1.0) / (accepted_ + rejected_ + 2.0); }

 private:
  int max_;
  bool adaptive_;
  double min_gain_;
  double accepted_ = 0, rejected_ = 0;  // decayed counts of accepted drafts and first rejections
  int skipped_ = 0;                     // steps without drafts since the last verify step
};

}  // namespace dsinfer::speculative
