#include "model/deepseek_v4/language_model.h"

#include "base/check.h"
#include "model/deepseek_v4/expert_parallel.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

// With the MTP layer's rows too.
class Sequence final : public StateSequence<SequenceState> {
 public:
  using StateSequence::StateSequence;
  int64_t mtp_length() const override { return state_->mtp_length(); }
  Status RollbackMtp(int64_t mtp_length) override { return state_->RollbackMtp(mtp_length); }
};

}  // namespace

SequenceState* StateOf(ModelSequence* seq) { return Sequence::StateOf(seq); }

std::unique_ptr<ModelSequence> AsModelSequence(std::unique_ptr<SequenceState> state) {
  return std::make_unique<Sequence>(std::move(state));
}

Status V4SupportsMtp(const Model& model) {
  if (model.has_mtp()) return Status::Ok();
  return InvalidArgument(
      "MTP speculative decoding: the model has no MTP layer "
      "(num_nextn_predict_layers is 0)");
}

Status V4SupportsDSpark() {
  return InvalidArgument(
      "DSpark speculative decoding: DeepSeek-V4 has no DSpark drafter; its drafter is the MTP "
      "layer (--speculative-method mtp)");
}

namespace {

class V4LanguageModel final : public LanguageModel {
 public:
  explicit V4LanguageModel(std::unique_ptr<Model> model)
      : model_(std::move(model)), info_(InfoOf(model_->config())) {}

  const ModelInfo& info() const override { return info_; }
  cache::StateLayout StateLayoutFor(int rollback_slack) const override {
    return DeepseekV4StateLayout(model_->config(), rollback_slack);
  }
  std::unique_ptr<ModelSequence> NewSequence(int rollback_slack, const cache::StateLayout& layout,
                                             cache::StatePages* pages) const override {
    return AsModelSequence(model_->NewSequence(rollback_slack, layout, pages));
  }

  StatusOr<ModelOutput> Forward(const std::vector<ModelChunk>& chunks, bool keep_streams) override {
    std::vector<SequenceChunk> batch;
    batch.reserve(chunks.size());
    for (const ModelChunk& ch : chunks) batch.push_back({StateOf(ch.seq), ch.ids, ch.logits_tail});
    DSINFER_ASSIGN_OR_RETURN(ForwardOutput out,
                             model_->Forward(batch, LogitsRows::kTail, keep_streams));
    return ModelOutput{std::move(out.logits), std::move(out.streams)};
  }

  Status SupportsMtp() const override { return V4SupportsMtp(*model_); }
  Status SupportsDSpark() const override { return V4SupportsDSpark(); }
  int64_t stream_width() const override {
    return int64_t{model_->config().hc_mult} * model_->config().hidden_size;
  }
  StatusOr<ModelOutput> ForwardMtp(const std::vector<MtpChunk>& chunks) override {
    DSINFER_RETURN_IF_ERROR(SupportsMtp());
    std::vector<Model::MtpChunk> batch;
    batch.reserve(chunks.size());
    for (const MtpChunk& ch : chunks) batch.push_back({StateOf(ch.seq), ch.streams, ch.next_ids});
    DSINFER_ASSIGN_OR_RETURN(ForwardOutput out, model_->ForwardMtp(batch, LogitsRows::kLast));
    return ModelOutput{std::move(out.logits), std::move(out.streams)};
  }

 private:
  std::unique_ptr<Model> model_;
  ModelInfo info_;
};

}  // namespace

ModelInfo InfoOf(const io::DeepseekV4Config& c) {
  return InfoFromConfig(io::ModelFamily::kDeepseekV4, c);
}

std::unique_ptr<LanguageModel> AsLanguageModel(std::unique_ptr<Model> model) {
  return std::make_unique<V4LanguageModel>(std::move(model));
}

StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options) {
  if (options.expert_parallel != 1 || options.eplb_redundant_experts != 0 ||
      options.eplb_interval != 0) {
    return LoadExpertParallel(model_dir, options);
  }
  ModelOptions mo;
  mo.num_threads = options.num_threads;
  mo.kv_cache_dtype = options.kv_cache_dtype;
  mo.fp8_mma = options.fp8_mma;
  DSINFER_ASSIGN_OR_RETURN(auto model, Model::Load(model_dir, mo));
  return AsLanguageModel(std::move(model));
}

}  // namespace dsinfer::model::deepseek_v4
