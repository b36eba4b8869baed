// SamplingParams: how one request turns logits into tokens and when it stops (OpenAI / vLLM
// semantics). A plain value type; Validate() reports every user mistake as InvalidArgument before a
// request enters the engine, so nothing downstream needs to re-check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "structured/constraint_spec.h"

namespace dsinfer::sampler {

struct SamplingParams {
  int n = 1;                       // completions per prompt; they share the prompt's prefill
  float temperature = 1.0f;        // 0: greedy (argmax, ties to the smallest id)
  int top_k = 0;                   // <= 0: off
  float top_p = 1.0f;              // nucleus mass in (0, 1]
  float min_p = 0.0f;              // drop tokens with p < min_p * p_max; [0, 1]
  float repetition_penalty = 1.0f; // > 0; divides positive / multiplies negative logits of seen tokens
  float presence_penalty = 0.0f;   // [-2, 2]; subtracted once per token present in the output
  float frequency_penalty = 0.0f;  // [-2, 2]; subtracted per occurrence in the output
  std::map<int32_t, float> logit_bias;  // token id -> bias in [-100, 100]
  std::vector<std::string> stop;        // stop strings (text; need a tokenizer)
  std::vector<int32_t> stop_token_ids;  // stop on these ids (the id is kept in the output)
  int max_tokens = 16;             // >= 1
  int min_tokens = 0;              // EOS and stop ids are masked until this many tokens exist
  bool ignore_eos = false;         // keep generating past EOS
  bool logprobs = false;           // return the chosen token's logprob
  int top_logprobs = 0;            // and this many most likely alternatives, [0, 20]
  // >= 0: the logprob of every prompt token after the first under the model, with this many most
  // likely alternatives ([0, 20]; vLLM's prompt_logprobs); -1: none.
  int prompt_logprobs = -1;
  std::optional<uint64_t> seed;    // fixed seed: same tokens alone or in any batch
  bool include_stop_str_in_output = false;
  // Output constraint (JSON schema / regex / choice / grammar; structured/constraint_spec.h): the
  // engine masks every token the constraint does not allow and stops when it is complete.
  structured::ConstraintSpec structured_outputs;

  bool greedy() const { return temperature == 0.0f; }

  // Range checks that need no model: InvalidArgument naming the field.
  Status Validate() const;
  // Checks ids in logit_bias / stop_token_ids against the vocabulary.
  Status ValidateForVocab(int64_t vocab_size) const;
};

}  // namespace dsinfer::sampler
