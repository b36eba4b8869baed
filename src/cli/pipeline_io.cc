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

int RunCommandBody(const std::string& name, const std::string& summary,
                   const std::vector<FlagSpec>& specs, int argc, char** argv,
                   const std::function<Status(const Flags&)>& body) {
  auto flags = Flags::Parse(argc, argv, 2, specs);
  if (!flags.ok()) {
    std::fprintf(stderr, "dsinfer %s: %s\n", name.c_str(), flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::printf("%s", Usage(name, summary, specs).c_str());
    return 0;
  }
  const Status st = body(*flags);
  if (!st.ok()) {
    std::fprintf(stderr, "dsinfer %s: %s\n", name.c_str(), st.ToString().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

}  // namespace dsinfer::cli
