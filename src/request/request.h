// Request: one generation request as the OpenAI / vLLM schema describes it, after validation —
// what the server's /v1/chat/completions and /v1/completions bodies and a `dsinfer generate
// --input` JSONL line all become (ParseRequest in request_parser.h). The engine-facing
// conversion lives in api/ (generate_request.h). A plain value type.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sampler/sampling_params.h"

namespace dsinfer::request {

// Which schema a body follows. kJsonl accepts every prompt form (prompt, prompt_ids, messages).
enum class Kind { kJsonl, kChat, kCompletion };

// tool_choice: "none" drops the tools from the prompt, "auto" lets the model choose. "required"
// and a named function are output constraints (output_constraint.h).
enum class ToolChoice { kAuto, kNone };

// One prompt of a list of prompts: text or token ids (exactly one is set).
struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
};

struct Request {
  Kind kind = Kind::kJsonl;
  // Exactly one of these four is set.
  std::string prompt;               // text, encoded as is (no BOS added)
  std::vector<int32_t> prompt_ids;  // token ids
  nlohmann::json messages;          // chat: the OpenAI messages array (null when not chat)
  // Completions (and JSONL) with a list of two or more prompts: each is its own engine request
  // with the same parameters (SplitPrompts in request_parser.h); choice i * n + j of the reply is
  // completion j of prompt i. A one-element list sets prompt / prompt_ids instead.
  std::vector<Prompt> prompts;

  // Chat rendering (recipe/).
  std::string tools_json;  // the OpenAI `tools` array as JSON text; "" = none
  ToolChoice tool_choice = ToolChoice::kAuto;
  bool parallel_tool_calls = true;  // false: only the first parsed tool call is returned
  bool thinking = false;
  std::string reasoning_effort;

  sampler::SamplingParams sampling;
  // max_tokens / max_completion_tokens appeared in the body. When it did not, a chat request may
  // use the whole context (vLLM's default); otherwise prompt + max_tokens must fit the context.
  bool max_tokens_given = false;
  int priority = 0;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text before the completion

  std::string model;  // "" = not given
  nlohmann::json id;  // a custom id (JSONL: echoed on the output line); null = none
  std::string user;   // accepted, unused
};

}  // namespace dsinfer::request
