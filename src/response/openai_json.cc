#include "response/openai_json.h"

#include <atomic>
#include <cstdio>
#include <random>

#include "tokenizer/utf8.h"

namespace dsinfer::response {

namespace {

using json = nlohmann::json;

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 413:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return "internal_error";
  }
}

json TokenJson(const tokenizer::Tokenizer& tok, int32_t id, float logprob) {
  const std::string& raw = tok.TokenBytes(id);
  json bytes = json::array();
  for (unsigned char b : raw) bytes.push_back(static_cast<int>(b));
  return {{"token", tokenizer::RepairUtf8(raw)}, {"logprob", logprob}, {"bytes", bytes}};
}

json ToolCallsJson(const std::vector<ToolCallDelta>& calls, bool with_index) {
  json out = json::array();
  for (const auto& c : calls) {
    json j = {{"id", c.id},
              {"type", "function"},
              {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
    if (with_index) j["index"] = c.index;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

json ErrorBody(int http_status, const std::string& message, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", ErrorType(http_status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", http_status}}}};
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t reasoning_tokens) {
  json u = {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  if (reasoning_tokens >= 0) {
    u["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  }
  return u;
}

json ChatMessageJson(const ChatStream& stream) {
  json m = {{"role", "assistant"}, {"content", stream.content()}};
  if (!stream.reasoning().empty()) m["reasoning_content"] = stream.reasoning();
  if (!stream.tool_calls().empty()) m["tool_calls"] = ToolCallsJson(stream.tool_calls(), false);
  return m;
}

json ChatDeltaJson(const ChatDelta& delta) {
  json d = json::object();
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.content.empty()) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) d["tool_calls"] = ToolCallsJson(delta.tool_calls, true);
  return d;
}

json ChatLogprobsJson(const tokenizer::Tokenizer& tok, const std::vector<LogprobEntry>& entries) {
  json content = json::array();
  for (const auto& e : entries) {
    json j = TokenJson(tok, e.id, e.logprob);
    j["top_logprobs"] = json::array();
    for (const auto& [id, lp] : e.top) j["top_logprobs"].push_back(TokenJson(tok, id, lp));
    content.push_back(std::move(j));
  }
  return {{"content", content}};
}

json CompletionLogprobsJson(const tokenizer::Tokenizer& tok,
                            const std::vector<LogprobEntry>& entries, int64_t offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& e : entries) {
    const std::string& raw = tok.TokenBytes(e.id);
    tokens.push_back(tokenizer::RepairUtf8(raw));
    token_logprobs.push_back(e.logprob);
    json alt = json::object();
    for (const auto& [id, lp] : e.top) alt[tokenizer::RepairUtf8(tok.TokenBytes(id))] = lp;
    top.push_back(std::move(alt));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(raw.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

std::string NewResponseId(const std::string& prefix) {
  static const uint64_t salt = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx%08llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(n & 0xffffffffu));
  return prefix + "-" + buf;
}

}  // namespace dsinfer::response
