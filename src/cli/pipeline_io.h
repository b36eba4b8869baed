// Helpers shared by the request-pipeline subcommands (tokenize, detokenize, render): reading
// input files, loading a tokenizer from --tokenizer / --model, and running a command body with the
// usual flag handling and exit codes (commands.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/flags.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {

StatusOr<std::string> ReadTextFile(const std::string& path);

// The tokenizer named by --tokenizer (a tokenizer.json or a model dir) or else --model.
StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizerFlag(const Flags& flags);

// Parses flags, prints --help, runs `body`, prints its error as "dsinfer NAME: ..." and returns
// 0, 2 (InvalidArgument) or 1.
int RunCommandBody(const std::string& name, const std::string& summary,
                   const std::vector<FlagSpec>& specs, int argc, char** argv,
                   const std::function<Status(const Flags&)>& body);

}  // namespace dsinfer::cli
