// `dsinfer render`: the recipe's chat encoding of a messages file. Prints
// {"prompt": "...", "ids": [...]} (ids when a tokenizer is given via --tokenizer or --model).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/pipeline_io.h"
#include "recipe/chat_encoder.h"
#include "tokenizer/utf8.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"messages-file", "JSON: an array of chat messages, or {\"messages\": [...], \"tools\": [...]}"},
    {"tools-file", "JSON array of OpenAI-format tools"},
    {"thinking", "chat (default) or thinking (also on/off)"},
    {"effort", "reasoning effort: v4 high|max; v4-0731 low|high|max; v4.1 low|high|xhigh|max|1-100"},
    {"dialect", "v4 (default), v4-0731 or v4.1 (default: from --model)"},
    {"keep-thinking", "keep the reasoning of earlier turns (drop_thinking=False)", false},
    {"tokenizer", "tokenizer.json or a model dir: also print the ids"},
    {"model", "model dir: its tokenizer and dialect"},
};

StatusOr<recipe::Json> ReadJson(const std::string& path) {
  DSINFER_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  if (const size_t bad = tokenizer::FindInvalidUtf8(text); bad != std::string::npos) {
    return InvalidArgument(path + ": not valid UTF-8 (first bad byte at offset " +
                           std::to_string(bad) + ")");
  }
  auto j = recipe::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  return j;
}

Status Run(const Flags& flags) {
  if (!flags.Has("messages-file")) return InvalidArgument("--messages-file is required");
  DSINFER_ASSIGN_OR_RETURN(recipe::Json doc, ReadJson(*flags.Get("messages-file")));
  recipe::EncodeOptions opts;
  recipe::Json messages = doc;
  if (doc.is_object()) {
    if (!doc.contains("messages")) return InvalidArgument("the messages file has no \"messages\"");
    messages = doc["messages"];
    if (doc.contains("tools")) opts.tools = doc["tools"];
  }
  if (auto t = flags.Get("tools-file")) {
    DSINFER_ASSIGN_OR_RETURN(opts.tools, ReadJson(*t));
  }
  const std::string thinking = flags.GetOr("thinking", "chat");
  if (thinking == "thinking" || thinking == "on" || thinking == "true") {
    opts.thinking = recipe::ThinkingMode::kThinking;
  } else if (thinking != "chat" && thinking != "off" && thinking != "false") {
    return InvalidArgument("--thinking must be chat or thinking");
  }
  opts.reasoning_effort = flags.GetOr("effort", "");
  opts.drop_thinking = !flags.Has("keep-thinking");
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (flags.Has("tokenizer") || flags.Has("model")) {
    DSINFER_ASSIGN_OR_RETURN(tok, LoadTokenizerFlag(flags));
  }
  if (auto d = flags.Get("dialect")) {
    DSINFER_ASSIGN_OR_RETURN(opts.dialect, recipe::ParseDialect(*d));
  } else if (auto m = flags.Get("model")) {
    const std::string system(recipe::kSystem);
    opts.dialect = recipe::DetectDialect(*m, tok && tok->TokenToId(system).has_value());
  }
  DSINFER_ASSIGN_OR_RETURN(const recipe::Prompt prompt, recipe::EncodeMessages(messages, opts));
  nlohmann::ordered_json out;
  out["prompt"] = prompt.Text();
  if (tok) {
    DSINFER_ASSIGN_OR_RETURN(out["ids"], prompt.ToIds(*tok));
  }
  std::printf("%s\n", out.dump().c_str());
  return Status::Ok();
}

}  // namespace

int RunRender(int argc, char** argv) {
  return RunSubcommand(argc, argv, "render",
                       "Renders chat messages with the DeepSeek-V4 encoding; prints {\"prompt\", \"ids\"}.",
                       kSpecs, Run);
}

}  // namespace dsinfer::cli
