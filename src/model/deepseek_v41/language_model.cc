#include "model/deepseek_v41/language_model.h"

#include <cmath>

#include "base/check.h"
#include "model/deepseek_v41/state_layout.h"

namespace dsinfer::model::deepseek_v41 {

namespace {

using Sequence = StateSequence<SequenceState>;

class V41LanguageModel final : public LanguageModel {
 public:
  explicit V41LanguageModel(std::unique_ptr<Model> model)
      : model_(std::move(model)), info_(InfoOf(model_->config())) {}

  const ModelInfo& info() const override { return info_; }
  cache::StateLayout StateLayoutFor(int rollback_slack) const override {
    return DeepseekV41StateLayout(model_->config(), rollback_slack, model_->has_dspark());
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
      batch.push_back({Sequence::StateOf(ch.seq), ch.ids, ch.logits_tail});
    }
    DSINFER_ASSIGN_OR_RETURN(std::vector<float> logits, model_->Forward(batch, LogitsRows::kTail));
    return ModelOutput{std::move(logits), {}};
  }

  Status SupportsMtp() const override {
    return InvalidArgument(
        "MTP speculative decoding: DeepSeek-V4.1 has no MTP layer; its drafter is DSpark "
        "(--speculative-method dspark)");
  }
  Status SupportsDSpark() const override {
    if (model_->has_dspark()) return Status::Ok();
    if (!model_->config().has_dspark()) {
      return InvalidArgument(
          "DSpark speculative decoding: the model has no DSpark draft layers "
          "(num_nextn_predict_layers is 0)");
    }
    return InvalidArgument("DSpark speculative decoding: the model was loaded without its drafter");
  }
  StatusOr<std::vector<BlockDraft>> DraftDSpark(const std::vector<DSparkChunk>& chunks) override {
    DSINFER_RETURN_IF_ERROR(SupportsDSpark());
    std::vector<DSparkRequest> batch;
    batch.reserve(chunks.size());
    for (const DSparkChunk& ch : chunks) batch.push_back({Sequence::StateOf(ch.seq), ch.anchor});
    DSINFER_ASSIGN_OR_RETURN(std::vector<DSparkDraft> drafts, model_->DraftDSpark(batch));
    std::vector<BlockDraft> out(drafts.size());
    for (size_t i = 0; i < drafts.size(); ++i) {
      out[i].ids = std::move(drafts[i].ids);
      for (float z : drafts[i].confidence)
        out[i].accept_prob.push_back(1.0f / (1.0f + std::exp(-z)));
    }
    return out;
  }

 private:
  std::unique_ptr<Model> model_;
  ModelInfo info_;
};

}  // namespace

ModelInfo InfoOf(const io::DeepseekV41Config& c) {
  ModelInfo info = InfoFromConfig(io::ModelFamily::kDeepseekV41, c);
  if (c.has_vision && c.image_token_id >= 0 && c.image_token_id < c.vocab_size) {
    info.refused_ids.push_back(static_cast<int32_t>(c.image_token_id));
  }
  if (c.has_dspark()) info.draft_block_size = c.dspark_block_size;
  return info;
}

std::unique_ptr<LanguageModel> AsLanguageModel(std::unique_ptr<Model> model) {
  return std::make_unique<V41LanguageModel>(std::move(model));
}

StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options) {
  DSINFER_RETURN_IF_ERROR(io::CheckV41KvCacheDtype(options.kv_cache_dtype));
  if (options.fp8_mma) {
    return Unimplemented(
        "the FP8-instruction numerics mode: DeepSeek-V4 only for now, not "
        "DeepSeek-V4.1");
  }
  if (options.expert_parallel != 1 || options.eplb_redundant_experts != 0 ||
      options.eplb_interval != 0) {
    return Unimplemented("expert parallelism: DeepSeek-V4 only for now, not DeepSeek-V4.1");
  }
  DSINFER_ASSIGN_OR_RETURN(auto model,
                           Model::Load(model_dir, {options.num_threads, options.dspark}));
  return AsLanguageModel(std::move(model));
}

}  // namespace dsinfer::model::deepseek_v41
