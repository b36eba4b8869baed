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

}  // namespace dsinfer::cli
