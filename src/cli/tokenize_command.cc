// `dsinfer tokenize`: text -> ids with Hugging Face's encode(text, add_special_tokens=False)
// semantics (added-token spellings in the text become their ids; --plain turns that off).
// Prints {"ids": [...]}.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/pipeline_io.h"
#include "tokenizer/utf8.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"tokenizer", "tokenizer.json or a model dir"},
    {"model", "model dir (used when --tokenizer is absent)"},
    {"text", "the text"},
    {"text-file", "read the text from this file (bytes as they are)"},
    {"plain", "plain BPE: do not match added/special-token spellings", false},
};

Status Run(const Flags& flags) {
  std::string text;
  if (flags.Has("text") == flags.Has("text-file")) return InvalidArgument("give exactly one of --text, --text-file");
  if (auto t = flags.Get("text")) {
    text = *t;
  } else {
    DSINFER_ASSIGN_OR_RETURN(text, ReadTextFile(*flags.Get("text-file")));
  }
  if (const size_t bad = tokenizer::FindInvalidUtf8(text); bad != std::string::npos) {
    return InvalidArgument("the text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  }
  DSINFER_ASSIGN_OR_RETURN(auto tok, LoadTokenizerFlag(flags));
  const auto ids = tok->Encode(text, /*allow_special=*/!flags.Has("plain"));
  std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  return Status::Ok();
}

}  // namespace

int RunTokenize(int argc, char** argv) {
  return RunSubcommand(argc, argv, "tokenize", "Text to token ids; prints {\"ids\": [...]}.", kSpecs, Run);
}

}  // namespace dsinfer::cli
