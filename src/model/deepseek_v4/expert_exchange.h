// The host-side exchange of an expert-parallel MoE layer, shared by the CPU model
// (MoeForwardParallel) and the CUDA model's host-staged exchange: a rank's (row, expert) pairs
// packed for the ranks the placement picks, the rows a rank received grouped by expert for its
// own experts, their outputs packed back in the order received, and the answers put back in pair
// order. The messages: per pair, its expert (int32) and its row (D floats); per answer, D floats.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "base/status.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"

namespace dsinfer::model::deepseek_v4 {

// What rank `me` sends for its pairs p = t K + k (sel[p] the expert of pair p, x [pairs / K, D]
// the rows), and which pairs went to each rank, in the order sent.
struct ExpertDispatch {
  std::vector<distributed::Bytes> send;    // [ranks]
  std::vector<std::vector<int64_t>> sent;  // [ranks] pair ids
};
ExpertDispatch PackExpertDispatch(const distributed::ExpertPlacement& placement, int me,
                                  const int32_t* sel, int64_t pairs, int64_t K, const float* x,
                                  int64_t D);

// The rows rank `me` received, grouped by expert: experts ascending, within one by source rank,
// then in the order sent. rows [total, D]; expert e = experts[i] owns rows offsets[i] ..
// offsets[i + 1] - 1; origin[r] = (source rank, index in its message); received[from] = the
// count from each rank.
struct ExpertWork {
  std::vector<int32_t> experts;
  std::vector<int64_t> offsets;  // experts.size() + 1
  std::vector<float> rows;
  std::vector<std::pair<int, int64_t>> origin;
  std::vector<int64_t> received;
  int64_t total() const { return static_cast<int64_t>(origin.size()); }
};
// Internal error for a malformed message or rows of an expert that `holds` refuses.
StatusOr<ExpertWork> GroupExpertWork(const std::vector<distributed::Bytes>& recv, int E, int64_t D,
                                     int me, const std::function<bool(int)>& holds);

// The answers to each source rank: outputs [total, D] (row r of the work) in the order received.
std::vector<distributed::Bytes> PackExpertReplies(const ExpertWork& work, const float* outputs,
                                                  int64_t D, int ranks);

// The answers received back, into y [pairs, D] at the pairs each rank was sent.
Status ScatterExpertReplies(const std::vector<distributed::Bytes>& back,
                            const ExpertDispatch& dispatch, int64_t D, float* y);

}  // namespace dsinfer::model::deepseek_v4
