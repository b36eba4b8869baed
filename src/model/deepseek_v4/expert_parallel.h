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
// hold, while the forwards go on; the next forward after that installs the new placement. A forward
// that fails after its ranks started (an internal error: bad input is refused before) leaves its
// requests' states part-advanced: they must not run again (the engine fails the step's requests);
// the group is made anew for the next forward.
// The same structure, with NCCL and a GPU per rank, is the multi-GPU layout (not built yet).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/language_model.h"

namespace dsinfer::model::deepseek_v4 {

// options.expert_parallel ranks (>= 1) of the model dir's DeepSeek-V4 model.
StatusOr<std::unique_ptr<LanguageModel>> LoadExpertParallel(const std::string& model_dir,
                                                            const LoadOptions& options);
// Tests: rank `rank`'s next MoE call of layer `moe_layer` fails instead of taking part in the
// exchange (the other ranks' calls then return its error, and the forward does). The model must be
// one LoadExpertParallel made.
void FailRankOnceForTesting(LanguageModel& model, int rank, int moe_layer);
// Waits for EPLB's plan in flight, if any, and installs it (otherwise installed before the first
// forward after it is done; the stats: LanguageModel::expert_parallel_stats). A no-op for any
// other model.
void FinishRebalance(LanguageModel& model);

}  // namespace dsinfer::model::deepseek_v4
