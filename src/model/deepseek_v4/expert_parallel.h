// Expert parallelism for DeepSeek-V4 on the CPU backend: the model as `expert_parallel` ranks in
// one process, each a Model holding its share of every MoE layer's routed experts (and a copy of
// the rest), joined by an in-process communicator (distributed/communicator.h). A forward splits
// its requests among the ranks (attention data-parallel: each rank the requests of about as many
// tokens), runs every rank on a thread of its own, and each MoE layer dispatches each (row,
// expert) pair to a rank holding the expert and combines the outputs back in the fixed order
// (MoeForwardParallel): a request's logits are the single model's, bit for bit, whatever the
// ranks, the split and the placement. EPLB counts the rows routed to each expert and, every
// eplb_interval forwards, re-plans each layer's placement (distributed::PlanPlacement, replicas
// in the spare slots) on a background thread that also stages the weights each rank will newly
// hold, while the forwards go on; the next forward after that installs the new placement.
// The same structure, with NCCL and a GPU per rank, is the multi-GPU layout (not built yet).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/language_model.h"

namespace dsinfer::model::deepseek_v4 {

// What EPLB has done so far (ExpertParallelStatsOf).
struct ExpertParallelStats {
  int ranks = 1;
  int64_t forwards = 0;
  int64_t rebalances = 0;  // placements installed
  int64_t experts_moved = 0;  // expert weights copied to a rank that did not hold them
  // Routed experts' weights in memory, over every rank and MoE layer (E x layers without
  // replicas: each rank loads only its share).
  int64_t held_experts = 0;
  // The last rebalance's expected busiest-rank load over the mean (distributed::LoadImbalance),
  // averaged over the MoE layers, under the old and the new placements (0: none yet).
  double imbalance_before = 0, imbalance_after = 0;
};

// options.expert_parallel ranks (>= 1) of the model dir's DeepSeek-V4 model.
StatusOr<std::unique_ptr<LanguageModel>> LoadExpertParallel(const std::string& model_dir,
                                                            const LoadOptions& options);
// Waits for EPLB's plan in flight, if any, and installs it (otherwise installed before the first
// forward after it is done). A no-op for any other model.
void FinishRebalance(LanguageModel& model);
// The stats of a model LoadExpertParallel made; null for any other model.
const ExpertParallelStats* ExpertParallelStatsOf(const LanguageModel& model);

}  // namespace dsinfer::model::deepseek_v4
