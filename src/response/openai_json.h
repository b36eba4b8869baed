// The OpenAI response objects as JSON: error objects, usage, chat messages and stream deltas,
// and token logprobs in the chat and the legacy completions shapes. Pure functions of their
// inputs (the tokenizer only spells token ids); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "response/chat_stream.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::response {

// {"error": {"message", "type", "param", "code"}}: `type` follows the HTTP status
// (invalid_request_error, authentication_error, not_found_error, rate_limit_error, ...);
// `param` is null when "".
nlohmann::json ErrorBody(int http_status, const std::string& message,
                         const std::string& param = "");

// {"prompt_tokens", "completion_tokens", "total_tokens"[, "completion_tokens_details":
// {"reasoning_tokens"}]}; reasoning_tokens < 0 leaves the details out.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
                         int64_t reasoning_tokens = -1);

// {"role": "assistant", "content", ["reasoning_content"], ["tool_calls"]}.
nlohmann::json ChatMessageJson(const ChatStream& stream);
// A stream delta: only the fields the delta has.
nlohmann::json ChatDeltaJson(const ChatDelta& delta);

// One generated token with its logprob and the most likely alternatives.
struct LogprobEntry {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}. A token's text is
// its bytes (lossily UTF-8 when it holds part of a character); `bytes` are exact.
nlohmann::json ChatLogprobsJson(const tokenizer::Tokenizer& tok,
                                const std::vector<LogprobEntry>& entries);
// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
// `offset` is the text offset of the first token (the echoed prompt's length, or 0).
nlohmann::json CompletionLogprobsJson(const tokenizer::Tokenizer& tok,
                                      const std::vector<LogprobEntry>& entries, int64_t offset);

// "<prefix>-<24 hex digits>", unique within the process and across restarts.
std::string NewResponseId(const std::string& prefix);

}  // namespace dsinfer::response
