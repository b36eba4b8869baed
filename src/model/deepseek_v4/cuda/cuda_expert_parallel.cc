#include "model/deepseek_v4/cuda/cuda_expert_parallel.h"

#include <string>
#include <thread>
#include <utility>

#include "io/model_config.h"
#include "io/model_family.h"

namespace dsinfer::model::deepseek_v4::cuda {

StatusOr<std::unique_ptr<CudaExpertParallel>> CudaExpertParallel::Load(
    const std::string& model_dir, const CudaModelOptions& options, int ranks) {
  if (ranks < 1) return InvalidArgument("expert parallelism: ranks must be >= 1");
  if (options.paged || options.mtp || options.dspark) {
    return Unimplemented("expert parallelism on the GPU runs slot-mode forwards (no engine yet)");
  }
  if (options.fp8_mma) {  // (its received rows are not sized into the mode's act_quant scratch)
    return Unimplemented("expert parallelism on the GPU does not run the FP8-instruction mode yet");
  }
  DSINFER_ASSIGN_OR_RETURN(const io::ModelFamily family, io::DetectModelFamily(model_dir));
  if (family != io::ModelFamily::kDeepseekV4) {
    return Unimplemented("expert parallelism on the GPU runs DeepSeek-V4 only");
  }
  DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config c, io::LoadDeepseekV4Config(model_dir));
  const int E = static_cast<int>(c.n_routed_experts);
  if (ranks > E) {
    return InvalidArgument("expert parallelism: " + std::to_string(ranks) + " ranks for " +
                           std::to_string(E) + " routed experts");
  }
  auto ep = std::unique_ptr<CudaExpertParallel>(new CudaExpertParallel());
  ep->placements_.assign(static_cast<size_t>(c.num_layers),
                         distributed::ExpertPlacement::Contiguous(E, ranks));
  for (int r = 0; r < ranks; ++r) {
    const CudaExpertParallel* self = ep.get();
    auto holds = [self, r](int layer, int e) {
      return layer < static_cast<int>(self->placements_.size()) &&
             self->placements_[static_cast<size_t>(layer)].Holds(r, e);
    };
    DSINFER_ASSIGN_OR_RETURN(auto m, CudaModel::Load(model_dir, options, holds));
    ep->models_.push_back(std::move(m));
  }
  DSINFER_RETURN_IF_ERROR(ep->NewGroup());
  return ep;
}

Status CudaExpertParallel::NewGroup() {
  // The old group goes only once every rank holds the new one (a rank refusing it leaves the
  // object broken: no rank then points at a freed communicator).
  auto next = distributed::MakeLocalGroup(ranks());
  for (int r = 0; r < ranks(); ++r) {
    broken_ = models_[static_cast<size_t>(r)]->SetExpertParallel(
        {next[static_cast<size_t>(r)].get(), &placements_});
    if (!broken_.ok()) {
      graveyard_.push_back(std::move(group_));
      group_ = std::move(next);
      return broken_;
    }
  }
  group_ = std::move(next);
  return Status::Ok();
}

StatusOr<std::vector<std::vector<float>>> CudaExpertParallel::Forward(
    const std::vector<std::vector<CudaModel::Chunk>>& chunks, LogitsRows rows) {
  const size_t n = models_.size();
  if (chunks.size() != n) {
    return InvalidArgument("expert parallelism: " + std::to_string(chunks.size()) +
                           " chunk lists for " + std::to_string(n) + " ranks");
  }
  DSINFER_RETURN_IF_ERROR(broken_);
  for (size_t r = 0; r < n; ++r) {  // nothing runs unless every rank takes its chunks
    if (!chunks[r].empty()) DSINFER_RETURN_IF_ERROR(models_[r]->CheckForward(chunks[r], rows));
  }
  std::vector<std::vector<float>> logits(n);
  std::vector<Status> status(n, Status::Ok());
  {
    std::vector<std::thread> threads;
    for (size_t r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        if (chunks[r].empty()) {
          status[r] = models_[r]->ForwardIdle();
          return;
        }
        // (A rank that fails aborts the group itself: the others' exchanges return its error.)
        StatusOr<std::vector<float>> out = models_[r]->Forward(chunks[r], rows);
        if (out.ok()) {
          logits[r] = std::move(out).value();
        } else {
          status[r] = out.status();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (const Status& s : status) {  // an aborted group gives every rank the first error
    if (!s.ok()) {
      DSINFER_RETURN_IF_ERROR(NewGroup());
      return s;
    }
  }
  return logits;
}

}  // namespace dsinfer::model::deepseek_v4::cuda
