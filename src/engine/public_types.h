// Conversions between the public embedding API's value types (include/dsinfer/engine.h) and the
// internal ones of sampler/. Pure functions.
#pragma once

#include <vector>

#include "dsinfer/engine.h"
#include "sampler/sampler.h"
#include "sampler/sampling_params.h"
#include "structured/constraint_spec.h"

namespace dsinfer::engine {

sampler::SamplingParams ToSamplerParams(const SamplingParams& p);
SamplingParams ToPublicParams(const sampler::SamplingParams& p);
structured::ConstraintSpec ToConstraintSpec(const OutputConstraint& c);
OutputConstraint ToOutputConstraint(const structured::ConstraintSpec& c);
std::vector<TokenLogprob> ToPublicLogprobs(const std::vector<sampler::TokenLogprob>& top);

}  // namespace dsinfer::engine
