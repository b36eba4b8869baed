// DeepSeek-V4.1 behind the model-family seam (model/language_model.h): Model and SequenceState
// (state_layout.h: shared KV across layers, FP8 / FP4 cache rows) as a LanguageModel and its
// ModelSequences. Its drafter is DSpark (SupportsDSpark / DraftDSpark, with LoadOptions::dspark);
// there is no MTP layer (SupportsMtp says so).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/model.h"
#include "model/language_model.h"

namespace dsinfer::model::deepseek_v41 {

ModelInfo InfoOf(const io::DeepseekV41Config& config);

std::unique_ptr<LanguageModel> AsLanguageModel(std::unique_ptr<Model> model);
StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options);

}  // namespace dsinfer::model::deepseek_v41
