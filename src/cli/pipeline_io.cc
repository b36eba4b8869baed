// Helpers of the request-pipeline subcommands.
#include "cli/pipeline_io.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace dsinfer::cli {

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizerFlag(const Flags& flags) {
  auto path = flags.Get("tokenizer");
  if (!path) path = flags.Get("model");
  if (!path) return InvalidArgument("--tokenizer (a tokenizer.json or a model dir) is required");
  return tokenizer::Tokenizer::Load(*path);
}

}  // namespace dsinfer::cli
