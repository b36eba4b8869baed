#include "engine/public_types.h"

namespace dsinfer {

Status SamplingParams::Validate() const { return engine::ToSamplerParams(*this).Validate(); }

namespace engine {

sampler::SamplingParams ToSamplerParams(const SamplingParams& p) {
  sampler::SamplingParams s;
  s.n = p.n;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.logit_bias = p.logit_bias;
  s.stop = p.stop;
  s.stop_token_ids = p.stop_token_ids;
  s.max_tokens = p.max_tokens;
  s.min_tokens = p.min_tokens;
  s.ignore_eos = p.ignore_eos;
  s.logprobs = p.logprobs;
  s.top_logprobs = p.top_logprobs;
  s.seed = p.seed;
  s.include_stop_str_in_output = p.include_stop_str_in_output;
  s.structured_outputs = ToConstraintSpec(p.structured_outputs);
  return s;
}

structured::ConstraintSpec ToConstraintSpec(const OutputConstraint& c) {
  structured::ConstraintSpec s;
  switch (c.kind) {
    case OutputConstraint::Kind::kNone:
      s.kind = structured::ConstraintKind::kNone;
      break;
    case OutputConstraint::Kind::kJsonObject:
      s.kind = structured::ConstraintKind::kJsonObject;
      break;
    case OutputConstraint::Kind::kJsonSchema:
      s.kind = structured::ConstraintKind::kJsonSchema;
      break;
    case OutputConstraint::Kind::kRegex:
      s.kind = structured::ConstraintKind::kRegex;
      break;
    case OutputConstraint::Kind::kChoice:
      s.kind = structured::ConstraintKind::kChoice;
      break;
    case OutputConstraint::Kind::kGrammar:
      s.kind = structured::ConstraintKind::kGrammar;
      break;
  }
  s.text = c.text;
  s.choices = c.choices;
  return s;
}

OutputConstraint ToOutputConstraint(const structured::ConstraintSpec& c) {
  OutputConstraint o;
  switch (c.kind) {
    case structured::ConstraintKind::kNone:
      o.kind = OutputConstraint::Kind::kNone;
      break;
    case structured::ConstraintKind::kJsonObject:
      o.kind = OutputConstraint::Kind::kJsonObject;
      break;
    case structured::ConstraintKind::kJsonSchema:
      o.kind = OutputConstraint::Kind::kJsonSchema;
      break;
    case structured::ConstraintKind::kRegex:
      o.kind = OutputConstraint::Kind::kRegex;
      break;
    case structured::ConstraintKind::kChoice:
      o.kind = OutputConstraint::Kind::kChoice;
      break;
    case structured::ConstraintKind::kGrammar:
      o.kind = OutputConstraint::Kind::kGrammar;
      break;
  }
  o.text = c.text;
  o.choices = c.choices;
  return o;
}

std::vector<TokenLogprob> ToPublicLogprobs(const std::vector<sampler::TokenLogprob>& top) {
  std::vector<TokenLogprob> out;
  out.reserve(top.size());
  for (const auto& t : top) out.push_back({t.id, t.logprob});
  return out;
}

}  // namespace engine
}  // namespace dsinfer
