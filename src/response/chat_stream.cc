#include "response/chat_stream.h"

#include <algorithm>

namespace dsinfer::response {

ChatStream::ChatStream(recipe::Dialect dialect, bool thinking, bool parallel_tool_calls,
                       std::string id_prefix)
    : parser_(dialect, thinking),
      parallel_tool_calls_(parallel_tool_calls),
      id_prefix_(std::move(id_prefix)) {}

ChatDelta ChatStream::Take(const recipe::ParseDelta& parsed) {
  ChatDelta d;
  d.reasoning = parsed.reasoning;
  d.content = parsed.content;
  for (const auto& call : parsed.tool_calls) {
    if (!parallel_tool_calls_ && !tool_calls_.empty()) break;
    ToolCallDelta t;
    t.index = static_cast<int>(tool_calls_.size());
    t.id = "call_" + id_prefix_ + "_" + std::to_string(t.index);
    t.name = call.name;
    t.arguments = call.arguments;
    tool_calls_.push_back(t);
    d.tool_calls.push_back(std::move(t));
  }
  reasoning_ += d.reasoning;
  content_ += d.content;
  return d;
}

ChatDelta ChatStream::Push(std::string_view text) { return Take(parser_.Push(text)); }

ChatDelta ChatStream::Finish() { return Take(parser_.Finish()); }

std::string ChatStream::FinishReason(std::string_view engine_reason) const {
  if (engine_reason == "stop" && !tool_calls_.empty()) return "tool_calls";
  return std::string(engine_reason);
}

int64_t ReasoningTokens(const std::vector<int32_t>& ids, int32_t think_end_id, bool thinking) {
  if (!thinking) return 0;
  auto it = std::find(ids.begin(), ids.end(), think_end_id);
  return it == ids.end() ? static_cast<int64_t>(ids.size()) : (it - ids.begin()) + 1;
}

}  // namespace dsinfer::response
