// Loads a model dir as the model family its config.json names (io/model_family.h), behind the
// family seam (language_model.h). Thread-safe (no shared state).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "model/language_model.h"

namespace dsinfer::model {

StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options = {});
// The model dir's ModelInfo from its config.json alone (no weights read).
StatusOr<ModelInfo> ReadModelInfo(const std::string& model_dir);

}  // namespace dsinfer::model
