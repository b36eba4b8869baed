#include "distributed/expert_placement.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "base/check.h"

namespace dsinfer::distributed {

ExpertPlacement::ExpertPlacement(int experts, int ranks, std::vector<int32_t> slot_expert)
    : experts_(experts),
      ranks_(ranks),
      slots_per_rank_(static_cast<int>(slot_expert.size()) / ranks),
      slot_expert_(std::move(slot_expert)),
      holders_(static_cast<size_t>(experts)) {
  for (int s = 0; s < static_cast<int>(slot_expert_.size()); ++s) {
    if (slot_expert_[s] >= 0) holders_[slot_expert_[s]].push_back(s / slots_per_rank_);
  }
}

ExpertPlacement ExpertPlacement::Contiguous(int experts, int ranks) {
  DSINFER_CHECK(experts >= 1 && ranks >= 1);
  const int per_rank = (experts + ranks - 1) / ranks;
  std::vector<int32_t> slots(static_cast<size_t>(per_rank) * ranks, -1);
  for (int e = 0; e < experts; ++e) slots[e] = e;
  return ExpertPlacement(experts, ranks, std::move(slots));
}

StatusOr<ExpertPlacement> ExpertPlacement::FromSlots(int experts, int ranks,
                                                     std::vector<int32_t> slot_expert) {
  if (experts < 1 || ranks < 1 || slot_expert.empty() ||
      slot_expert.size() % static_cast<size_t>(ranks) != 0) {
    return InvalidArgument("expert placement: " + std::to_string(slot_expert.size()) +
                           " slots for " + std::to_string(ranks) + " ranks and " +
                           std::to_string(experts) + " experts");
  }
  const size_t per_rank = slot_expert.size() / static_cast<size_t>(ranks);
  std::vector<int> count(static_cast<size_t>(experts), 0);
  for (size_t s = 0; s < slot_expert.size(); ++s) {
    const int32_t e = slot_expert[s];
    if (e < -1 || e >= experts) {
      return InvalidArgument("expert placement: slot " + std::to_string(s) + " holds expert " +
                             std::to_string(e) + " of " + std::to_string(experts));
    }
    if (e < 0) continue;
    ++count[e];
    const size_t first = s - s % per_rank;
    for (size_t o = first; o < s; ++o) {
      if (slot_expert[o] == e) {
        return InvalidArgument("expert placement: rank " + std::to_string(s / per_rank) +
                               " holds expert " + std::to_string(e) + " twice");
      }
    }
  }
  for (int e = 0; e < experts; ++e) {
    if (count[e] == 0) {
      return InvalidArgument("expert placement: expert " + std::to_string(e) + " has no slot");
    }
  }
  return ExpertPlacement(experts, ranks, std::move(slot_expert));
}

bool ExpertPlacement::Holds(int rank, int expert) const {
  const auto& h = holders_[expert];
  return std::binary_search(h.begin(), h.end(), rank);
}

std::vector<int32_t> ExpertPlacement::ExpertsOf(int rank) const {
  std::vector<int32_t> out;
  for (int s = rank * slots_per_rank_; s < (rank + 1) * slots_per_rank_; ++s) {
    if (slot_expert_[s] >= 0) out.push_back(slot_expert_[s]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int ExpertPlacement::RankFor(int expert, int from, int64_t nth) const {
  if (Holds(from, expert)) return from;
  const auto& h = holders_[expert];
  return h[static_cast<size_t>((nth + from) % static_cast<int64_t>(h.size()))];
}

StatusOr<ExpertPlacement> PlanPlacement(const std::vector<double>& load, int ranks,
                                        int slots_per_rank) {
  const int experts = static_cast<int>(load.size());
  if (experts < 1 || ranks < 1 || slots_per_rank < 1 ||
      static_cast<int64_t>(ranks) * slots_per_rank < experts) {
    return InvalidArgument("expert placement: " + std::to_string(ranks) + " ranks of " +
                           std::to_string(slots_per_rank) + " slots cannot hold " +
                           std::to_string(experts) + " experts");
  }
  for (double l : load) {
    if (!(l >= 0)) return InvalidArgument("expert placement: a load is negative or NaN");
  }
  // Replicas: each spare slot to the expert with the most load per replica (below `ranks`).
  std::vector<int> replicas(static_cast<size_t>(experts), 1);
  const int64_t spare = static_cast<int64_t>(ranks) * slots_per_rank - experts;
  for (int64_t i = 0; i < spare; ++i) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      if (replicas[e] >= ranks) continue;
      if (best < 0 || load[e] / replicas[e] > load[best] / replicas[best]) best = e;
    }
    if (best < 0) break;  // every expert on every rank
    ++replicas[best];
  }
  // Packing: heaviest replica first, to the least loaded rank with room that lacks the expert.
  std::vector<std::pair<int, int>> items;  // (expert, replica)
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < replicas[e]; ++r) items.emplace_back(e, r);
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    return load[a.first] / replicas[a.first] > load[b.first] / replicas[b.first];
  });
  std::vector<double> rank_load(static_cast<size_t>(ranks), 0.0);
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(ranks));
  for (const auto& [e, r] : items) {
    int best = -1;
    for (int k = 0; k < ranks; ++k) {
      if (static_cast<int>(held[k].size()) >= slots_per_rank ||
          std::find(held[k].begin(), held[k].end(), e) != held[k].end())
        continue;
      if (best < 0 || rank_load[k] < rank_load[best]) best = k;
    }
    if (best < 0) {
      // A first replica always finds a rank: no rank holds its expert yet (an expert's replicas
      // are adjacent in `items`, the first one first), and some slot is free (slots >= replicas).
      DSINFER_CHECK(r > 0);
      continue;
    }
    held[best].push_back(e);
    rank_load[best] += load[e] / replicas[e];
  }
  std::vector<int32_t> slots(static_cast<size_t>(ranks) * slots_per_rank, -1);
  for (int k = 0; k < ranks; ++k) {
    std::sort(held[k].begin(), held[k].end());
    std::copy(held[k].begin(), held[k].end(),
              slots.begin() + static_cast<int64_t>(k) * slots_per_rank);
  }
  return ExpertPlacement::FromSlots(experts, ranks, std::move(slots));
}

std::vector<double> RankLoads(const ExpertPlacement& p, const std::vector<double>& load) {
  DSINFER_CHECK(static_cast<int>(load.size()) == p.experts());
  std::vector<double> out(static_cast<size_t>(p.ranks()), 0.0);
  for (int e = 0; e < p.experts(); ++e) {
    const auto& h = p.Holders(e);
    for (int32_t r : h) out[r] += load[e] / static_cast<double>(h.size());
  }
  return out;
}

double LoadImbalance(const ExpertPlacement& p, const std::vector<double>& load) {
  const std::vector<double> per_rank = RankLoads(p, load);
  const double total = std::accumulate(per_rank.begin(), per_rank.end(), 0.0);
  if (total <= 0) return 1.0;
  return *std::max_element(per_rank.begin(), per_rank.end()) / (total / p.ranks());
}

}  // namespace dsinfer::distributed
