#include "io/config_json.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dsinfer::io {

Status ReadYarn(const nlohmann::json& rp, YarnParams* yarn, const char* model) {
  const std::string type = rp.value("rope_type", rp.value("type", std::string("default")));
  if (type == "default") return Status::Ok();
  if (type != "yarn")
    return Unimplemented("config.json: RoPE type '" + type + "' is not supported");
  yarn->enabled = true;
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"factor"}, &yarn->factor, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"original_max_position_embeddings"},
                                  &yarn->original_max_position_embeddings, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"beta_fast"}, &yarn->beta_fast, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"beta_slow"}, &yarn->beta_slow, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"truncate"}, &yarn->truncate, false));
  if (yarn->original_max_position_embeddings <= 0) {
    return InvalidArgument("config.json: YaRN needs original_max_position_embeddings > 0");
  }
  double attention_factor = 1.0;
  DSINFER_RETURN_IF_ERROR(ReadKey(rp, {"attention_factor"}, &attention_factor, false));
  if (attention_factor != 1.0) {
    return Unimplemented(std::string("config.json: YaRN attention_factor != 1 is not used by ") +
                         model);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadConfigText(const std::string& model_dir) {
  const auto path = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status CheckIndexHeads(int index_n_heads) {
  if (index_n_heads <= kMaxIndexHeads) return Status::Ok();
  return InvalidArgument("config.json: index_n_heads = " + std::to_string(index_n_heads) +
                         " must be <= " + std::to_string(kMaxIndexHeads) +
                         " (the indexer's score tree)");
}

Status ConfigFileError(const std::string& model_dir, const Status& parse_error) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  const StatusCode code = parse_error.code() == StatusCode::kInvalidArgument ? StatusCode::kDataLoss
                                                                             : parse_error.code();
  return Status(code, path + ": " + parse_error.message());
}

}  // namespace dsinfer::io
