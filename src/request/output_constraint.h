// ParseOutputConstraint: what a request asks its output to conform to — `response_format`
// (json_object / json_schema), `structured_outputs` (vLLM: json / regex / choice / grammar, and the
// legacy guided_* keys: structured/constraint_spec.h) and a `tool_choice` of "required" or a named
// function, which forces a DSML tool call over the request's `tools` (structured/
// tool_call_grammar.h; `parallel_tool_calls` false: exactly one); under tool_choice auto, tools
// marked `"strict": true` constrain the answer's tool calls (StrictToolCallSpec). The ONE place
// of the request schema where these keys are read. A forced tool call without tools, naming a
// function that is not among them, or together with response_format / structured_outputs is an
// InvalidArgument. Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "structured/constraint_spec.h"

namespace dsinfer::request {

// Reads a request body (an object). `ordered`: the same body with its own key order, when the
// caller has it (a JSON schema's property order is its generation order; nlohmann::json sorts
// keys). response_format {"type": "text"}, tool_choice "none" / "auto" and absent or null keys
// are no constraint (kind kNone).
StatusOr<structured::ConstraintSpec> ParseOutputConstraint(
    const nlohmann::json& body, const nlohmann::ordered_json* ordered = nullptr);

}  // namespace dsinfer::request
