// RequestJson: one line of a `dsinfer generate --input` file <-> a GenerateRequest, and a result ->
// one output line. Input keys: exactly one of "prompt" (text), "prompt_ids" (ids) or "messages"
// ([{"role", "content"}]); the sampling parameters by their OpenAI/vLLM names (max_tokens,
// temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty,
// logit_bias, stop, stop_token_ids, min_tokens, ignore_eos, logprobs, top_logprobs, seed, n,
// include_stop_str_in_output); the output constraint (response_format, structured_outputs,
// guided_*: structured/constraint_spec.h); "priority"; "thinking" and "reasoning_effort" (chat
// rendering); "id" (echoed back). Unknown keys are errors, so typos never pass silently. Pure
// functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dsinfer/engine.h"

namespace dsinfer::cli {

// `defaults` supplies every parameter the line does not set.
StatusOr<GenerateRequest> ParseRequestJson(const nlohmann::json& line, const GenerateRequest& defaults);

// {"id", "prompt_tokens", "choices": [{"index", "text", "ids", "finish_reason", "stop", "logprobs"}],
//  "usage": {...}, "ttft_ms", "e2e_ms"} or {"id", "error": {"code", "message"}}.
nlohmann::json ResultJson(const nlohmann::json& id, const RequestResult& result, bool with_text);
// For a chat request: adds to each choice of `line` the OpenAI-style assistant "message" parsed by
// the recipe (content, reasoning_content, tool_calls).
void AddChatMessages(const Engine& engine, const ChatOptions& chat, nlohmann::json* line);

}  // namespace dsinfer::cli
