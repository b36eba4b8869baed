// The output lines of `dsinfer generate`: a result -> one JSONL line. The input lines follow the
// server's request schema (request/request_parser.h, Kind::kJsonl). Pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dsinfer/engine.h"

namespace dsinfer::cli {

// {"id", "prompt_tokens", "choices": [{"index", "text", "ids", "finish_reason", "stop", "logprobs"}],
//  "usage": {...}, "ttft_ms", "e2e_ms"} or {"id", "error": {"code", "message"}}.
nlohmann::json ResultJson(const nlohmann::json& id, const RequestResult& result, bool with_text);
// For a chat request: adds to each choice of `line` the OpenAI-style assistant "message" parsed by
// the recipe (content, reasoning_content, tool_calls); a choice that called tools and stopped by
// itself gets finish_reason "tool_calls" (as the server's).
void AddChatMessages(const Engine& engine, const ChatOptions& chat, nlohmann::json* line);

}  // namespace dsinfer::cli
