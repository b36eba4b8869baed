// ParseRequest: an OpenAI / vLLM request body (or a `dsinfer generate --input` JSONL line) -> a
// validated Request. One schema for the server and the CLI:
//   every kind: model, stream, stream_options{include_usage}, user, metadata, id, n, temperature,
//     top_p, top_k, min_p, seed (>= 0 or null), stop, stop_token_ids, max_tokens, min_tokens,
//     presence_penalty, frequency_penalty, repetition_penalty, logit_bias, ignore_eos,
//     include_stop_str_in_output, logprobs, priority, response_format, structured_outputs;
//   chat (and JSONL): messages, tools, tool_choice, parallel_tool_calls, reasoning_effort,
//     chat_template_kwargs{thinking | enable_thinking}, thinking, max_completion_tokens,
//     top_logprobs; `logprobs` is true / false;
//   completions: prompt (text, token ids, or a list of prompts: strings and / or arrays of token
//     ids; Request::prompts), echo, prompt_logprobs
//     (refused: not supported yet), suffix (refused); `logprobs` is the number of alternatives;
//   JSONL: prompt (as completions'), prompt_ids, messages and every chat key.
// A null value means "not given". Unknown keys are InvalidArgument naming the key, as OpenAI
// does; every message starts with the quoted key it is about (the server reports it as `param`).
// Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"
#include "request/request.h"

namespace dsinfer::request {

// `defaults` supplies every field the body does not set (the CLI's flags, or the server's
// defaults); its kind is ignored.
// `ordered`: the same body with its own key order (optional; keeps a JSON schema's property
// order for structured output).
StatusOr<Request> ParseRequest(const nlohmann::json& body, Kind kind, const Request& defaults,
                               const nlohmann::ordered_json* ordered = nullptr);

// One request per prompt of `r` in order, each with its prompt / prompt_ids set and every other
// field as in `r`; just {r} when `r` has a single prompt (or messages).
std::vector<Request> SplitPrompts(const Request& r);

}  // namespace dsinfer::request
