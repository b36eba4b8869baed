// The CPU ModelRunner: model/deepseek_v4's Model with per-sequence SequenceStates bound to the
// state cache's pages.
#include <unordered_map>

#include "base/check.h"
#include "executor/model_runner.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/state_layout.h"

namespace dsinfer::executor {

namespace {

namespace mdl = model::deepseek_v4;

class CpuModelRunner final : public ModelRunner {
 public:
  explicit CpuModelRunner(std::unique_ptr<mdl::Model> model)
      : model_(std::move(model)),
        // Rollback slack 0: no speculative decoding yet, so the rings hold exactly the window.
        layout_(mdl::DeepseekV4StateLayout(model_->config(), /*rollback_slack=*/0)) {}

  const io::DeepseekV4Config& config() const override { return model_->config(); }
  const cache::StateLayout& state_layout() const override { return layout_; }
  Status BindCache(cache::StateCache* cache) override {
    cache_ = cache;
    return Status::Ok();
  }

  StatusOr<RunOutput> Run(const std::vector<RunChunk>& chunks,
                          const std::vector<RunDraw>& draws) override {
    DSINFER_CHECK(cache_ != nullptr);
    std::vector<mdl::SequenceChunk> batch;
    batch.reserve(chunks.size());
    for (const RunChunk& ch : chunks) {
      auto& state = states_[ch.seq];
      // The state's rows live in the pages the scheduler reserved for this sequence.
      if (!state) state = model_->NewSequence(/*rollback_slack=*/0, layout_, cache_->Pages(ch.seq));
      DSINFER_CHECK(state->length() == ch.start);
      batch.push_back({state.get(), ch.tokens});
    }
    DSINFER_ASSIGN_OR_RETURN(mdl::ForwardOutput out,
                             model_->Forward(batch, mdl::LogitsRows::kLast));
    const int64_t vocab = model_->config().vocab_size;
    RunOutput result;
    result.tokens.reserve(draws.size());
    for (const RunDraw& d : draws) {
      result.tokens.push_back(sampler_.Sample(
          out.logits.data() + static_cast<int64_t>(d.chunk) * vocab, vocab, d.input));
    }
    return result;
  }

  void Release(scheduler::SeqId seq) override { states_.erase(seq); }

  void Fork(scheduler::SeqId parent, scheduler::SeqId child) override {
    auto& state = states_[child];
    state = model_->NewSequence(/*rollback_slack=*/0, layout_, cache_->Pages(child));
    state->CopyFrom(*states_.at(parent));
  }

  size_t num_sequences() const override { return states_.size(); }

 private:
  std::unique_ptr<mdl::Model> model_;
  cache::StateLayout layout_;
  cache::StateCache* cache_ = nullptr;
  sampler::Sampler sampler_;
  std::unordered_map<scheduler::SeqId, std::unique_ptr<mdl::SequenceState>> states_;
};

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const std::string& model_dir,
                                                            int num_threads) {
  DSINFER_ASSIGN_OR_RETURN(auto model, mdl::Model::Load(model_dir, {num_threads}));
  return std::unique_ptr<ModelRunner>(new CpuModelRunner(std::move(model)));
}

}  // namespace dsinfer::executor
