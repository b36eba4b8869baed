// ConstraintSpec: what a request's output must match (a plain value type held by
// sampler::SamplingParams), and the one parser of the request keys that set it:
//   OpenAI  "response_format": {"type": "text" | "json_object" | "json_schema",
//                               "json_schema": {"name", "schema", "strict", "description"}}
//   vLLM    "structured_outputs": {"json": schema | "schema text", "regex": "...",
//                                  "choice": ["a", "b"], "grammar": "GBNF", "json_object": true}
//   legacy  "guided_json", "guided_regex", "guided_choice", "guided_grammar" (top level)
// At most one constraint per request. Pass the body parsed as nlohmann::ordered_json to keep the
// schema's property order (a std::map json sorts it). Pure functions; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsinfer::structured {

// kToolCalls: a forced DSML tool call (tool_choice "required" or a named function); built by
// ToolCallSpec (tool_call_grammar.h) from the request's tools, not by ParseOutputConstraint.
enum class ConstraintKind {
  kNone,
  kJsonObject,
  kJsonSchema,
  kRegex,
  kChoice,
  kGrammar,
  kToolCalls
};
const char* ConstraintKindName(ConstraintKind kind);  // "none", "json_object", "json_schema", ...

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kNone;
  // json_schema: the schema (JSON); regex: the pattern; grammar: GBNF; tool_calls: the tools,
  // the forced name and whether calls may be parallel (JSON, tool_call_grammar.h)
  std::string text;
  std::vector<std::string> choices;  // choice: the allowed outputs

  bool active() const { return kind != ConstraintKind::kNone; }
  // Identifies the compiled constraint (for caches).
  std::string Key() const;
};

// The request keys this parser owns (a request parser skips them and calls ParseOutputConstraint).
bool IsOutputConstraintKey(const std::string& key);
// The constraint of a request body (kind kNone when it sets none). InvalidArgument for malformed
// or conflicting keys; the schema / regex / grammar themselves are checked when compiled.
StatusOr<ConstraintSpec> ParseOutputConstraint(const nlohmann::json& request_body);
StatusOr<ConstraintSpec> ParseOutputConstraint(const nlohmann::ordered_json& request_body);

}  // namespace dsinfer::structured
