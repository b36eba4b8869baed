#include "engine/public_types.h"

namespace dsinfer {

Status SamplingParams::Validate() const { return engine::ToSamplerParams(*this).Validate(); }

namespace engine {

namespace {

// Field by field: the two types have the same fields (the public one is the API's own type).
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
  t.prompt_logprobs = f.prompt_logprobs;
  t.seed = f.seed;
  t.include_stop_str_in_output = f.include_stop_str_in_output;
  return t;
}

}  // namespace

sampler::SamplingParams ToSamplerParams(const SamplingParams& p) {
  sampler::SamplingParams s = CopyParams<sampler::SamplingParams>(p);
  s.structured_outputs = ToConstraintSpec(p.structured_outputs);
  return s;
}

SamplingParams ToPublicParams(const sampler::SamplingParams& p) {
  SamplingParams s = CopyParams<SamplingParams>(p);
  s.structured_outputs = ToOutputConstraint(p.structured_outputs);
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
    case OutputConstraint::Kind::kToolCalls:
      s.kind = structured::ConstraintKind::kToolCalls;
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
    case structured::ConstraintKind::kToolCalls:
      o.kind = OutputConstraint::Kind::kToolCalls;
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
