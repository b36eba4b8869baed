#include "api/generate_request.h"

namespace dsinfer::api {

namespace {

template <typename To, typename From>
To CopyParams(const From& f) {
  To t;
  t.n = f.n;
  t.temperature = f.temperature;
  t.top_k = f.top_k;
  t.top_p = f.top_p;
  t.min_p = f.min_p;
  t.repetition_penalty = f.repetition_penalty;
  t.presence_penalty = f.presence_penalty;
  t.frequency_penalty = f.frequency_penalty;
  t.logit_bias = f.logit_bias;
  t.stop = f.stop;
  t.stop_token_ids = f.stop_token_ids;
  t.max_tokens = f.max_tokens;
  t.min_tokens = f.min_tokens;
  t.ignore_eos = f.ignore_eos;
  t.logprobs = f.logprobs;
  t.top_logprobs = f.top_logprobs;
  t.seed = f.seed;
  t.include_stop_str_in_output = f.include_stop_str_in_output;
  return t;
}

}  // namespace

EngineSamplingParams ToEngineParams(const sampler::SamplingParams& p) {
  return CopyParams<EngineSamplingParams>(p);
}

sampler::SamplingParams ToSchemaParams(const EngineSamplingParams& p) {
  return CopyParams<sampler::SamplingParams>(p);
}

GenerateRequest ToGenerateRequest(const request::Request& r) {
  GenerateRequest g;
  g.prompt = r.prompt;
  g.prompt_ids = r.prompt_ids;
  if (r.messages.is_array()) {
    for (const auto& m : r.messages) {
      // The whole message goes to the recipe (content parts, tool_calls, reasoning_content).
      g.messages.push_back({m.value("role", ""), "", m.dump()});
    }
  }
  g.chat.thinking = r.thinking;
  g.chat.reasoning_effort = r.reasoning_effort;
  if (r.tool_choice != request::ToolChoice::kNone) g.chat.tools_json = r.tools_json;
  g.params = ToEngineParams(r.sampling);
  g.priority = r.priority;
  // vLLM: a chat request without max_tokens may use the rest of the context.
  g.max_tokens_up_to_context = r.kind == request::Kind::kChat && !r.max_tokens_given;
  return g;
}

}  // namespace dsinfer::api
