// `dsinfer detokenize`: ids -> text, as Hugging Face's decode(ids) (lossy UTF-8).
// Prints {"text": "..."}.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/pipeline_io.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"tokenizer", "tokenizer.json or a model dir"},
    {"model", "model dir (used when --tokenizer is absent)"},
    {"ids", "ids as 1,2,3 or a JSON array [1, 2, 3]"},
    {"ids-file", "JSON file {\"ids\": [...]} or [...]"},
    {"skip-special", "drop tokens flagged special", false},
};

StatusOr<std::vector<int32_t>> ParseIds(const std::string& text, const std::string& what) {
  std::string s = text;
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && s[first] != '[' && s[first] != '{') s = "[" + s + "]";
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_object() && j.contains("ids")) j = j["ids"];
  if (j.is_discarded() || !j.is_array()) return InvalidArgument(what + ": expected ids like 1,2,3 or [1, 2, 3]");
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return InvalidArgument(what + ": ids must be non-negative integers");
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

Status Run(const Flags& flags) {
  if (flags.Has("ids") == flags.Has("ids-file")) return InvalidArgument("give exactly one of --ids, --ids-file");
  std::vector<int32_t> ids;
  if (auto s = flags.Get("ids")) {
    DSINFER_ASSIGN_OR_RETURN(ids, ParseIds(*s, "--ids"));
  } else {
    DSINFER_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(*flags.Get("ids-file")));
    DSINFER_ASSIGN_OR_RETURN(ids, ParseIds(text, *flags.Get("ids-file")));
  }
  DSINFER_ASSIGN_OR_RETURN(auto tok, LoadTokenizerFlag(flags));
  for (int32_t id : ids) {
    if (!tok->IsKnownId(id)) {
      return InvalidArgument("token id " + std::to_string(id) + " is not in the tokenizer (ids < " +
                             std::to_string(tok->id_end()) + ")");
    }
  }
  const std::string text = tok->Decode(ids, flags.Has("skip-special"));
  std::printf("%s\n", nlohmann::json{{"text", text}}.dump().c_str());
  return Status::Ok();
}

}  // namespace

int RunDetokenize(int argc, char** argv) {
  return RunSubcommand(argc, argv, "detokenize", "Token ids to text; prints {\"text\": \"...\"}.", kSpecs, Run);
}

}  // namespace dsinfer::cli
