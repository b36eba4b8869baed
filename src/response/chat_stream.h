// ChatStream: one chat completion's generated text, pushed as it arrives, -> OpenAI message
// deltas (reasoning_content, content, tool calls with ids and JSON-string arguments). It runs the
// recipe's StreamingParser on every push, so a streamed reply is parsed while it is generated;
// the parser's result does not depend on how the text is chunked, so the deltas of a stream add up
// to exactly the message of the same completion parsed at once (the unstreamed reply is built by
// this same class). The text is the engine's (special tokens skipped; </think> and the DSML
// markup are ordinary tokens and stay). One per completion; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/dialect.h"
#include "recipe/streaming_parser.h"

namespace dsinfer::response {

struct ToolCallDelta {
  int index = 0;   // position among this message's tool calls
  std::string id;  // "call_<prefix>_<index>"
  std::string name;
  std::string arguments;  // a JSON object as text
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatStream {
 public:
  // `thinking`: the prompt ended in thinking mode (the reply starts with reasoning).
  // `parallel_tool_calls` false: tool calls after the first are dropped. `id_prefix` makes the
  // tool-call ids unique (the response id).
  ChatStream(recipe::Dialect dialect, bool thinking, bool parallel_tool_calls,
             std::string id_prefix);

  ChatDelta Push(std::string_view text);
  // End of the completion: releases held-back text. Call once.
  ChatDelta Finish();

  // The message so far (all deltas together).
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCallDelta>& tool_calls() const { return tool_calls_; }

  // OpenAI's finish_reason: "tool_calls" when the model called tools and stopped by itself,
  // else the engine's reason ("stop", "length", ...).
  std::string FinishReason(std::string_view engine_reason) const;

 private:
  ChatDelta Take(const recipe::ParseDelta& parsed);

  recipe::StreamingParser parser_;
  bool parallel_tool_calls_;
  std::string id_prefix_;
  std::string reasoning_;
  std::string content_;
  std::vector<ToolCallDelta> tool_calls_;
};

// Tokens of a reply spent on reasoning: in thinking mode, those up to and including the first
// `think_end_id`, or all of them when it never came; 0 otherwise.
int64_t ReasoningTokens(const std::vector<int32_t>& ids, int32_t think_end_id, bool thinking);

}  // namespace dsinfer::response
