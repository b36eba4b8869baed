// EncodeMessages: the DeepSeek-V4 chat encoding (recipe-v4.md §3), a port of the reference
// encoder `encoding_dsv4.py` (and of the V4.1 encoder for Dialect::kV41) that returns the prompt as
// segments (prompt.h): Prompt::Text() is byte-identical to the reference string, Prompt::ToIds()
// tokenizes it with control tokens only where the encoder writes them.
// Pure function; thread-safe.
#pragma once

#include <string>

#include "base/status.h"
#include "recipe/dialect.h"
#include "recipe/messages.h"
#include "recipe/prompt.h"

namespace dsinfer::recipe {

enum class ThinkingMode { kChat, kThinking };

struct EncodeOptions {
  Dialect dialect = Dialect::kV4;
  ThinkingMode thinking = ThinkingMode::kChat;
  std::string reasoning_effort;  // "" = the dialect's default (dialect.h)
  bool drop_thinking = true;     // drop earlier turns' reasoning (off when tools are present)
  bool add_bos = true;
  bool add_generation_prompt = true;  // V4.1 only; V4's last user turn always ends the prompt
  Json tools;    // OpenAI tools array (or null), attached to the head system message
  Json context;  // earlier messages already in the model's cache (or null): not rendered
};

// `messages` is an OpenAI-style JSON array. Errors (InvalidArgument) for bad messages: unknown
// role, tool call without a name, empty developer content, unknown task or effort.
StatusOr<Prompt> EncodeMessages(const Json& messages, const EncodeOptions& options);

// The DSML block of assistant tool calls as the encoder renders it (starting "\n\n<｜DSML｜...");
// `tool_calls` is an OpenAI tool_calls array. Exposed for the parser's round-trip tests.
Prompt RenderToolCalls(const Json& tool_calls, Dialect dialect);

}  // namespace dsinfer::recipe
