// ToGenerateRequest: a validated request::Request -> the engine's GenerateRequest (the public
// embedding API). The only place the schema meets the engine's types, shared by the server and
// `dsinfer generate --input`. Pure function; thread-safe.
#pragma once

#include "dsinfer/engine.h"
#include "request/request.h"

namespace dsinfer::api {

GenerateRequest ToGenerateRequest(const request::Request& r);

// The sampling parameters between the schema's type and the public API's (field by field: the
// two types have the same fields, and stay separate types once the public API owns its own).
using EngineSamplingParams = decltype(GenerateRequest::params);
EngineSamplingParams ToEngineParams(const sampler::SamplingParams& p);
sampler::SamplingParams ToSchemaParams(const EngineSamplingParams& p);

}  // namespace dsinfer::api
