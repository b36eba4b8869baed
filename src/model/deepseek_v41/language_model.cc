#include "model/deepseek_v41/language_model.h"

#include "base/check.h"
#include "model/deepseek_v41/state_layout.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

class Sequence final : public ModelSequence {
 public:
  explicit Sequence(std::unique_ptr<SequenceState> state) : state_(std::move(state)) {}
  SequenceState* state() const { return state_.get(); }

  int64_t length() const override { return state_->length(); }
  Status Rollback(int64_t length) override { return state_->Rollback(length); }
  void CopyFrom(const ModelSequence& other) override {
    const auto* from = dynamic_cast<const Sequence*>(&other);
    DSINFER_CHECK(from != nullptr);
    state_->CopyFrom(*from->state_);
  }
  size_t bytes() const override { return state_->bytes(); }

 private:
  std::unique_ptr<SequenceState> state_;
};

class V41LanguageModel final : public LanguageModel {
 public:
  explicit V41LanguageModel(std::unique_ptr<Model> model)
      : model_(std::move(model)), info_(InfoOf(model_->config())) {}

  const ModelInfo& info() const override { return info_; }
  cache::StateLayout StateLayoutFor(int rollback_slack) const override {
    return DeepseekV41StateLayout(model_->config(), rollback_slack);
  }
  std::unique_ptr<ModelSequence> NewSequence(int rollback_slack, const cache::StateLayout& layout,
                                             cache::StatePages* pages) const override {
    return std::make_unique<Sequence>(model_->NewSequence(rollback_slack, layout, pages));
  }

  StatusOr<ModelOutput> Forward(const std::vector<ModelChunk>& chunks, bool keep_streams) override {
    DSINFER_CHECK(!keep_streams);  // only the MTP drafter asks for them
    std::vector<SequenceChunk> batch;
    batch.reserve(chunks.size());
    for (const ModelChunk& ch : chunks) {
      auto* seq = dynamic_cast<Sequence*>(ch.seq);
      DSINFER_CHECK(seq != nullptr);
      batch.push_back({seq->state(), ch.ids, ch.logits_tail});
    }
    DSINFER_ASSIGN_OR_RETURN(std::vector<float> logits, model_->Forward(batch, LogitsRows::kTail));
    return ModelOutput{std::move(logits), {}};
  }

  Status SupportsMtp() const override {
    return Unimplemented(
        "MTP speculative decoding: DeepSeek-V4.1 has no MTP layer (its drafter is DSpark, which "
        "is not built yet); use --speculative-method ngram");
  }

 private:
  std::unique_ptr<Model> model_;
  ModelInfo info_;
};

}  // namespace

ModelInfo InfoOf(const io::DeepseekV41Config& c) {
  ModelInfo info;
  info.family = io::ModelFamily::kDeepseekV41;
  info.vocab_size = c.vocab_size;
  info.bos_token_id = c.bos_token_id;
  info.eos_token_id = c.eos_token_id;
  info.max_position_embeddings = c.max_position_embeddings;
  return info;
}

std::unique_ptr<LanguageModel> AsLanguageModel(std::unique_ptr<Model> model) {
  return std::make_unique<V41LanguageModel>(std::move(model));
}

StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options) {
  DSINFER_ASSIGN_OR_RETURN(auto model, Model::Load(model_dir, {options.num_threads}));
  return AsLanguageModel(std::move(model));
}

}  // namespace dsinfer::model::deepseek_v41
