// OutputConstraint: what a request asks its output to conform to — `response_format`
// (json_object / json_schema), `structured_outputs` (vLLM: json / regex / choice / grammar) and a
// `tool_choice` of "required" or a named function. ParseOutputConstraint is the ONE place these
// keys are read; structured output (structured/) plugs in here. Until it lands every real
// constraint is refused with InvalidArgument "... is not supported yet", so the server answers
// 400 and nothing is silently ignored. Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace dsinfer::request {

struct OutputConstraint {
  bool any = false;     // false: the output is unconstrained
  std::string key;      // the body key that asked for it
  nlohmann::json spec;  // that key's value
};

// Reads response_format, structured_outputs and tool_choice of a request body (an object).
// response_format {"type": "text"}, tool_choice "none" / "auto" and absent or null keys are no
// constraint.
StatusOr<OutputConstraint> ParseOutputConstraint(const nlohmann::json& body);

}  // namespace dsinfer::request
