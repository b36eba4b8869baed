// The cost side of adaptive speculation: an online model of what a step costs, fitted to the
// engine's own measurements. A step's wall time is modelled as base + per_row * rows (weighted
// least squares over the recent steps, older steps decaying), and a draft token's own cost (the MTP
// layer's drafting time per token; the n-gram lookup costs nothing measurable) as a decayed
// average. From them, the expected time one sequence adds to a step of `batch` sequences when it
// verifies k drafts: base / batch + per_row * (1 + k) + per_draft * k.
#pragma once

#include <cstdint>

namespace dsinfer::speculative {

class StepCostModel {
 public:
  // A step ran `rows` forward rows in `seconds` (launch to sampled ids).
  void ObserveStep(int64_t rows, double seconds);
  // Drafting `tokens` draft tokens took `seconds`.
  void ObserveDrafting(int64_t tokens, double seconds);
  // Enough steps seen to fit (before: the draft length is the acceptance rule's alone).
  bool ready() const { return steps_ >= kMinSteps; }
  double base() const;     // seconds per step
  double per_row() const;  // seconds per forward row
  double per_draft() const { return draft_tokens_ > 0 ? draft_s_ / draft_tokens_ : 0.0; }
  // One sequence's share of a step of `batch` sequences that verifies k drafts, in seconds.
  double SequenceCost(int k, int64_t batch) const;

  static constexpr int kMinSteps = 8;

 private:
  void Fit(double* base, double* per_row) const;
  // Decayed sums over steps: weight, rows, rows^2, time, rows * time.
  double w_ = 0, r_ = 0, rr_ = 0, t_ = 0, rt_ = 0;
  double draft_s_ = 0, draft_tokens_ = 0;
  int64_t steps_ = 0;
};

}  // namespace dsinfer::speculative
