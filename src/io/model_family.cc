#include "io/model_family.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/deepseek_v41_config.h"

namespace dsinfer::io {

const char* ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kDeepseekV4:
      return "DeepSeek-V4";
    case ModelFamily::kDeepseekV41:
      return "DeepSeek-V4.1";
  }
  return "?";
}

ModelFamily ModelFamilyOfConfigJson(const std::string& json_text) {
  return IsDeepseekV41ConfigJson(json_text) ? ModelFamily::kDeepseekV41 : ModelFamily::kDeepseekV4;
}

StatusOr<ModelFamily> DetectModelFamily(const std::string& model_dir) {
  const auto path = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ModelFamilyOfConfigJson(ss.str());
}

}  // namespace dsinfer::io
