// DeepSeek-V4 on the GPU as expert-parallel ranks (slot mode): `ranks` CUDA models of one model
// dir, each holding its contiguous share of every MoE layer's routed experts (and a copy of the
// rest), joined by the in-process communicator; every forward runs each rank on a thread of its
// own, its own sequences' chunks or, without any, its part in the exchanges
// (CudaModel::SetExpertParallel: routed on the device, exchanged through the host). A sequence's
// logits are the single model's, bit for bit, on whichever rank it lives.
// The ranks share the current device: a test bed for the exchange and the per-rank loading (one
// GPU per rank needs per-device kernel attributes and device-side transfers: not built). Not the
// engine's path yet (its forwards are paged and captured in graphs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "model/deepseek_v4/cuda/cuda_model.h"

namespace dsinfer::model::deepseek_v4::cuda {

class CudaExpertParallel {
 public:
  // ranks >= 1 models of the dir (DeepSeek-V4; Unimplemented for V4.1), the experts of each layer
  // in order over the ranks (ExpertPlacement::Contiguous).
  static StatusOr<std::unique_ptr<CudaExpertParallel>> Load(const std::string& model_dir,
                                                            const CudaModelOptions& options,
                                                            int ranks);
  CudaExpertParallel(const CudaExpertParallel&) = delete;  // the ranks point into it
  CudaExpertParallel& operator=(const CudaExpertParallel&) = delete;
  int ranks() const { return static_cast<int>(models_.size()); }
  CudaModel& model(int rank) { return *models_[static_cast<size_t>(rank)]; }
  const distributed::ExpertPlacement& placement(int layer) const {
    return placements_[static_cast<size_t>(layer)];
  }
  // One forward of the group: chunks[r] on rank r's model (its own slots, CudaModel::Forward);
  // a rank with none idles through the exchanges. Each rank's logits as CudaModel::Forward's
  // (empty for an idle rank). Every rank's chunks are checked before any rank starts
  // (InvalidArgument, OutOfRange: nothing ran); one list per rank. An error after that (an
  // exchange) fails the forward, leaves its sequences part-advanced (they must not run again) and
  // the group is made anew.
  StatusOr<std::vector<std::vector<float>>> Forward(
      const std::vector<std::vector<CudaModel::Chunk>>& chunks, LogitsRows rows);

 private:
  CudaExpertParallel() = default;
  Status NewGroup();
  Status broken_;  // NewGroup failed: every forward fails with it
  std::vector<distributed::ExpertPlacement> placements_;
  std::vector<std::unique_ptr<CudaModel>> models_;
  std::vector<std::unique_ptr<distributed::Communicator>> group_;
  // A group some rank refused (NewGroup), kept while ranks may point at it.
  std::vector<std::vector<std::unique_ptr<distributed::Communicator>>> graveyard_;
};

}  // namespace dsinfer::model::deepseek_v4::cuda
