// DeepSeek-V4 behind the model-family seam (model/language_model.h): Model and SequenceState as a
// LanguageModel and its ModelSequences, with the MTP layer as the seam's MTP drafter.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "io/model_config.h"
#include "model/deepseek_v4/model.h"
#include "model/language_model.h"

namespace dsinfer::model::deepseek_v4 {

ModelInfo InfoOf(const io::DeepseekV4Config& config);

std::unique_ptr<LanguageModel> AsLanguageModel(std::unique_ptr<Model> model);
// The seam's sequence over a V4 state, and back (a sequence another family made is our bug).
std::unique_ptr<ModelSequence> AsModelSequence(std::unique_ptr<SequenceState> state);
SequenceState* StateOf(ModelSequence* seq);
// The family seam's SupportsMtp / SupportsDSpark of a V4 model.
Status V4SupportsMtp(const Model& model);
Status V4SupportsDSpark();
StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options);

}  // namespace dsinfer::model::deepseek_v4
