// The CUDA ModelRunner: model/deepseek_v4/cuda's CudaModel, one device state slot per sequence
// (the engine's cache plans admission and preemption; the slots hold RunnerOptions::max_len tokens
// each until the CUDA model reads paged state). The draws run on the device (CudaSampler) behind
// the forward: only sampled ids and logprobs come back to the host. CUDA builds only.
#include <unordered_map>

#include "base/check.h"
#include "executor/cuda_sampler.h"
#include "executor/model_runner.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/state_layout.h"

namespace dsinfer::executor {

namespace {

namespace mdl = model::deepseek_v4;
using mdl::cuda::CudaModel;

class CudaModelRunner final : public ModelRunner {
 public:
  explicit CudaModelRunner(std::unique_ptr<CudaModel> model)
      : model_(std::move(model)),
        sampler_(model_->config().vocab_size),
        layout_(mdl::DeepseekV4StateLayout(model_->config(), /*rollback_slack=*/0)) {}

  const io::DeepseekV4Config& config() const override { return model_->config(); }
  const cache::StateLayout& state_layout() const override { return layout_; }
  void BindCache(cache::StateCache*) override {}  // the state lives in the model's device slots

  StatusOr<RunOutput> Run(const std::vector<RunChunk>& chunks,
                          const std::vector<RunDraw>& draws) override {
    std::vector<CudaModel::Chunk> batch;
    batch.reserve(chunks.size());
    for (const RunChunk& ch : chunks) {
      auto it = slots_.find(ch.seq);
      if (it == slots_.end()) {
        DSINFER_CHECK(ch.start == 0);
        DSINFER_ASSIGN_OR_RETURN(int slot, model_->NewSequence());
        it = slots_.emplace(ch.seq, slot).first;
      }
      DSINFER_CHECK(model_->length(it->second) == ch.start);
      batch.push_back({it->second, ch.tokens});
    }
    DSINFER_ASSIGN_OR_RETURN(const CudaModel::DeviceLogits logits,
                             model_->ForwardToDevice(batch, mdl::LogitsRows::kLast));
    DSINFER_CHECK(logits.rows == static_cast<int64_t>(chunks.size()));
    RunOutput out;
    out.tokens = sampler_.Sample(logits.data, draws, model_->stream());
    return out;
  }

  void Release(scheduler::SeqId seq) override {
    auto it = slots_.find(seq);
    if (it == slots_.end()) return;
    model_->FreeSequence(it->second);
    slots_.erase(it);
  }

  void Fork(scheduler::SeqId parent, scheduler::SeqId child) override {
    Release(child);
    auto slot = model_->NewSequence();
    DSINFER_CHECK_MSG(slot.ok(), "the engine forks only within its sequence limit");
    model_->CopySequence(slots_.at(parent), *slot);
    slots_[child] = *slot;
  }

  size_t num_sequences() const override { return slots_.size(); }

 private:
  std::unique_ptr<CudaModel> model_;
  CudaSampler sampler_;
  cache::StateLayout layout_;
  std::unordered_map<scheduler::SeqId, int> slots_;
};

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const RunnerOptions& o) {
  mdl::cuda::CudaModelOptions opt;
  opt.max_seqs = o.max_sequences;
  opt.max_len = o.max_len;
  opt.max_tokens = o.max_tokens;
  opt.all_logits = false;
  std::unique_ptr<CudaModel> model;
  if (o.random_preset.empty()) {
    DSINFER_ASSIGN_OR_RETURN(model, CudaModel::Load(o.model_dir, opt));
  } else {
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config cfg, LoadRunnerConfig(o));
    DSINFER_ASSIGN_OR_RETURN(model, CudaModel::CreateRandom(cfg, o.random_seed, opt));
  }
  return std::unique_ptr<ModelRunner>(new CudaModelRunner(std::move(model)));
}

}  // namespace dsinfer::executor
