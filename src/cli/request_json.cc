#include "cli/request_json.h"

#include <algorithm>

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

// [{"id", "logprob", "top": [{"id", "logprob"}, ...]}, ...]
json LogprobsJson(const std::vector<TokenLogprobs>& lps) {
  json out = json::array();
  for (const auto& lp : lps) {
    json e = {{"id", lp.id}, {"logprob", lp.logprob}};
    if (!lp.top.empty()) {
      e["top"] = json::array();
      for (const auto& t : lp.top) e["top"].push_back({{"id", t.id}, {"logprob", t.logprob}});
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace

json ResultJson(const json& id, const RequestResult& result, bool with_text) {
  json out;
  out["id"] = id;
  if (!result.status.ok()) {
    out["error"] = {{"code", StatusCodeName(result.status.code())}, {"message", result.status.message()}};
  }
  if (result.completions.empty()) return out;
  out["prompt_tokens"] = result.prompt_tokens;
  // prompt_logprobs: tokens 1..n-1 of the prompt (the first has none).
  if (!result.prompt_logprobs.empty())
    out["prompt_logprobs"] = LogprobsJson(result.prompt_logprobs);
  json choices = json::array();
  int64_t completion_tokens = 0;
  double ttft = 0, e2e = 0;
  for (const auto& c : result.completions) {
    json ch = {{"index", c.index}, {"ids", c.ids}, {"finish_reason", FinishReasonName(c.finish)}};
    if (with_text) ch["text"] = c.text;
    if (!c.stop.empty()) ch["stop"] = c.stop;
    if (c.draft_tokens > 0) {
      ch["speculative"] = {{"draft_tokens", c.draft_tokens},
                           {"accepted_tokens", c.accepted_tokens}};
    }
    if (!c.logprobs.empty()) ch["logprobs"] = LogprobsJson(c.logprobs);
    choices.push_back(ch);
    completion_tokens += static_cast<int64_t>(c.ids.size());
    ttft = std::max(ttft, c.ttft_s);
    e2e = std::max(e2e, c.e2e_s);
  }
  out["choices"] = choices;
  out["usage"] = {{"prompt_tokens", result.prompt_tokens}, {"completion_tokens", completion_tokens}};
  out["ttft_ms"] = ttft * 1e3;
  out["e2e_ms"] = e2e * 1e3;
  return out;
}

void AddChatMessages(const Engine& engine, const ChatOptions& chat, json* line) {
  if (!line->contains("choices")) return;
  for (auto& ch : (*line)["choices"]) {
    auto reply = engine.ParseChatReply(ch["ids"].get<std::vector<int32_t>>(), chat);
    if (!reply.ok()) continue;
    json message = {{"role", "assistant"}, {"content", reply->content}};
    if (!reply->reasoning_content.empty()) message["reasoning_content"] = reply->reasoning_content;
    if (!reply->tool_calls.empty()) {
      message["tool_calls"] = json::array();
      for (size_t i = 0; i < reply->tool_calls.size(); ++i) {
        const auto& call = reply->tool_calls[i];
        message["tool_calls"].push_back({{"id", "call_" + std::to_string(i)},
                                         {"type", "function"},
                                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      // As the server says it: the model called tools and stopped by itself.
      if (ch.value("finish_reason", "") == "stop") ch["finish_reason"] = "tool_calls";
    }
    ch["message"] = message;
  }
}

}  // namespace dsinfer::cli
