#include "sampler/sampling_params.h"

#include <cmath>

namespace dsinfer::sampler {

namespace {

Status Bad(const std::string& field, const std::string& what) {
  return InvalidArgument("sampling parameter " + field + " " + what);
}

}  // namespace

Status SamplingParams::Validate() const {
  if (n < 1 || n > 128) return Bad("n", "must be in [1, 128], got " + std::to_string(n));
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 100) {
    return Bad("temperature", "must be in [0, 100], got " + std::to_string(temperature));
  }
  if (top_k < -1) return Bad("top_k", "must be -1, 0 (off) or positive");
  if (!(top_p > 0 && top_p <= 1)) return Bad("top_p", "must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0 && min_p <= 1)) return Bad("min_p", "must be in [0, 1], got " + std::to_string(min_p));
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) {
    return Bad("repetition_penalty", "must be > 0");
  }
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) return Bad("presence_penalty", "must be in [-2, 2]");
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) {
    return Bad("frequency_penalty", "must be in [-2, 2]");
  }
  for (const auto& [id, bias] : logit_bias) {
    if (!(bias >= -100 && bias <= 100)) {
      return Bad("logit_bias", "values must be in [-100, 100] (token " + std::to_string(id) + ")");
    }
  }
  if (max_tokens < 1) return Bad("max_tokens", "must be >= 1, got " + std::to_string(max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens) return Bad("min_tokens", "must be in [0, max_tokens]");
  if (top_logprobs < 0 || top_logprobs > 20) return Bad("top_logprobs", "must be in [0, 20]");
  if (prompt_logprobs < -1 || prompt_logprobs > 20)
    return Bad("prompt_logprobs", "must be in [0, 20] (or -1: none)");
  if (stop.size() > 16) return Bad("stop", "allows at most 16 strings");
  for (const auto& s : stop) {
    if (s.empty()) return Bad("stop", "strings must not be empty");
  }
  return Status::Ok();
}

Status SamplingParams::ValidateForVocab(int64_t vocab_size) const {
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return Bad("logit_bias", "names token " + std::to_string(id) + " outside the vocabulary [0, " +
                                   std::to_string(vocab_size) + ")");
    }
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return Bad("stop_token_ids", "names token " + std::to_string(id) + " outside the vocabulary");
    }
  }
  return Status::Ok();
}

}  // namespace dsinfer::sampler
