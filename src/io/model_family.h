// ModelFamily: which model a model dir holds, by its config.json — DeepSeek-V4 (model_type
// "deepseek_v4", or a config without one: the legacy official keys) or DeepSeek-V4.1
// ("deepseek_v41" with a nested text_config, or a flat "deepseek_v41_text"). Each family has its
// own config type (model_config.h, deepseek_v41_config.h) and its own model (model/deepseek_v4,
// model/deepseek_v41) behind the one engine. Pure functions; thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace dsinfer::io {

enum class ModelFamily { kDeepseekV4, kDeepseekV41 };

// "DeepSeek-V4", "DeepSeek-V4.1".
const char* ModelFamilyName(ModelFamily family);
// The family of config.json text.
ModelFamily ModelFamilyOfConfigJson(const std::string& json_text);
// Reads <dir>/config.json: NotFound when there is none.
StatusOr<ModelFamily> DetectModelFamily(const std::string& model_dir);

}  // namespace dsinfer::io
