// StreamingParser: turns generated text (decoded with control tokens, e.g. by
// tokenizer::IncrementalDetokenizer) into reasoning_content / content / tool_calls deltas
// (recipe-v4.md §3.7). A state machine REASONING -> CONTENT -> TOOL_CALLS -> DONE that holds back
// only text that could still be the start of a marker (</think>, "\n\n<｜DSML｜tool_calls", EOS),
// so every chunking of the same text gives the same result. DSML that cannot be parsed (malformed,
// or unterminated at Finish) stays content: no text is ever dropped, only markup that parsed.
// Tool-call arguments are the reference's JSON ("{\"city\": \"Paris\", \"days\": 2}").
// One per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipe/dialect.h"

namespace dsinfer::recipe {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text
  bool operator==(const ToolCall&) const = default;
};

struct ParseDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool done = false;  // the end-of-sentence token was seen
  void Append(const ParseDelta& other);
};

class StreamingParser {
 public:
  // `thinking`: the prompt ended with <think>, so the output starts with reasoning.
  StreamingParser(Dialect dialect, bool thinking);

  ParseDelta Push(std::string_view text);
  // End of the stream: releases held-back text; an unterminated tool-call block becomes content.
  ParseDelta Finish();

 private:
  enum class State { kReasoning, kContent, kToolCalls, kAfterToolCalls, kDone };
  enum class Step { kNeedMore, kInvalid, kInvoke, kEnd };

  void Run(ParseDelta* out, bool final);
  bool RunReasoning(ParseDelta* out, bool final);
  bool RunContent(ParseDelta* out, bool final);
  bool RunToolCalls(ParseDelta* out, bool final);
  bool RunAfterToolCalls(ParseDelta* out, bool final);
  // Parses one element of the tool-call block at buf_[pos_]: ">\n" then an invoke or the end tag.
  Step ParseElement(size_t* next, ToolCall* call) const;
  // Literal at buf_[at]: 1 = matches, 0 = buf_ ends inside it (could match), -1 = mismatch.
  int MatchAt(size_t at, std::string_view lit) const;

  std::string marker_;        // "\n\n<｜DSML｜tool_calls"
  std::string invoke_open_;   // "<｜DSML｜invoke"
  std::string invoke_close_;  // "</｜DSML｜invoke"
  std::string param_open_;    // "<｜DSML｜parameter"
  std::string param_close_;   // "/｜DSML｜parameter"
  std::string calls_close_;   // "</｜DSML｜tool_calls>"
  State state_;
  std::string buf_;      // text not yet emitted
  size_t pos_ = 0;       // kToolCalls: parse position in buf_ (buf_[0..pos_) parsed and consumed)
  bool skip_marker_at_start_ = false;  // content fallback: buf_ starts with a marker that failed
};

// The whole completion at once (same results as streaming it).
ParseDelta ParseCompletion(std::string_view text, Dialect dialect, bool thinking);

}  // namespace dsinfer::recipe
