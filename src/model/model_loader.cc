#include "model/model_loader.h"

#include "model/deepseek_v4/language_model.h"
#include "model/deepseek_v41/language_model.h"

namespace dsinfer::model {

StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(const std::string& model_dir,
                                                           const LoadOptions& options) {
  DSINFER_ASSIGN_OR_RETURN(const io::ModelFamily family, io::DetectModelFamily(model_dir));
  switch (family) {
    case io::ModelFamily::kDeepseekV4:
      return deepseek_v4::LoadLanguageModel(model_dir, options);
    case io::ModelFamily::kDeepseekV41:
      return deepseek_v41::LoadLanguageModel(model_dir, options);
  }
  return Internal("unknown model family");
}

StatusOr<ModelInfo> ReadModelInfo(const std::string& model_dir) {
  DSINFER_ASSIGN_OR_RETURN(const io::ModelFamily family, io::DetectModelFamily(model_dir));
  switch (family) {
    case io::ModelFamily::kDeepseekV4: {
      DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config c, io::LoadDeepseekV4Config(model_dir));
      return deepseek_v4::InfoOf(c);
    }
    case io::ModelFamily::kDeepseekV41: {
      DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV41Config c, io::LoadDeepseekV41Config(model_dir));
      return deepseek_v41::InfoOf(c);
    }
  }
  return Internal("unknown model family");
}

}  // namespace dsinfer::model
