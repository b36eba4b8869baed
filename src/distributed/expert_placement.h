// Expert parallelism's placement of one MoE layer's routed experts, and its load balancer (EPLB).
// The ranks hold `slots_per_rank` expert slots each; slot s (on rank s / slots_per_rank) holds one
// expert or none. Every expert has at least one replica and a rank holds an expert at most once.
// Replicas compute the same rows bit for bit (the same weights, the same batch-invariant kernels),
// so where a row's expert runs never changes its result: the placement only moves work.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace dsinfer::distributed {

class ExpertPlacement {
 public:
  // Experts in ascending order, ceil(experts / ranks) slots per rank (the spare ones, on the last
  // ranks, empty): expert parallelism without replicas.
  static ExpertPlacement Contiguous(int experts, int ranks);
  // slot_expert[s]: the expert in slot s (-1: none), ranks * slots_per_rank entries. Checks that
  // every expert is held, at most once per rank, and that the ids are in [-1, experts).
  static StatusOr<ExpertPlacement> FromSlots(int experts, int ranks,
                                             std::vector<int32_t> slot_expert);

  int experts() const { return experts_; }
  int ranks() const { return ranks_; }
  int slots_per_rank() const { return slots_per_rank_; }
  const std::vector<int32_t>& slot_expert() const { return slot_expert_; }
  // The ranks holding `expert`, ascending.
  const std::vector<int32_t>& Holders(int expert) const { return holders_[expert]; }
  bool Holds(int rank, int expert) const;
  // The experts `rank` holds, ascending.
  std::vector<int32_t> ExpertsOf(int rank) const;
  // The rank that computes the `nth` (0, 1, ...) of rank `from`'s rows routed to `expert` in one
  // exchange: `from` itself when it holds the expert (no transfer), else its holders in turn,
  // each source rank starting at another one (so the rows split evenly over the replicas, as
  // RankLoads assumes).
  int RankFor(int expert, int from, int64_t nth) const;

  bool operator==(const ExpertPlacement& o) const {
    return experts_ == o.experts_ && ranks_ == o.ranks_ && slot_expert_ == o.slot_expert_;
  }

 private:
  ExpertPlacement(int experts, int ranks, std::vector<int32_t> slot_expert);

  int experts_ = 0, ranks_ = 0, slots_per_rank_ = 0;
  std::vector<int32_t> slot_expert_;
  std::vector<std::vector<int32_t>> holders_;  // [expert] ranks, ascending
};

// EPLB: a placement of load.size() experts over ranks x slots_per_rank slots (at least one slot
// per expert) from each expert's load (e.g. its rows over a window; any nonnegative scale). The
// spare slots go to replicas, one at a time to the expert whose load per replica is then the
// largest (at most one replica per rank); then the replicas, heaviest (load / replicas) first,
// each to the least loaded rank that has a free slot and does not hold that expert yet (a replica
// with no such rank is dropped). Deterministic: ties go to the lower expert, then the lower rank.
StatusOr<ExpertPlacement> PlanPlacement(const std::vector<double>& load, int ranks,
                                        int slots_per_rank);

// Each rank's expected load under `placement`: an expert's load split evenly over its replicas.
std::vector<double> RankLoads(const ExpertPlacement& placement, const std::vector<double>& load);
// The busiest rank's expected load over the mean rank's (1: balanced; 1 when there is no load).
double LoadImbalance(const ExpertPlacement& placement, const std::vector<double>& load);

}  // namespace dsinfer::distributed
