// JsonSchemaCompiler: a JSON Schema (draft 4 to 2020-12, the subset JSONSchemaBench exercises)
// into the grammar form, and the grammar of any JSON value / object (json_object mode).
// Supported: type (all, and type arrays), properties / required / additionalProperties, enum,
// const, anyOf, oneOf (when its branches are provably disjoint), allOf (merged), $ref / $defs /
// definitions (local JSON pointers, recursion included), items / prefixItems / additionalItems,
// minItems / maxItems, minLength / maxLength, pattern, format (json_formats.h), minimum / maximum /
// exclusive bounds. Generation choices (each output still validates): properties in schema order,
// properties the schema does not name are generated only for objects that name none, at most
// `max_whitespace` whitespace bytes between tokens. Every other validation keyword is an
// Unimplemented error naming it; annotations (title, description, default, ...) are ignored.
// Pure function of its inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "structured/code_points.h"
#include "structured/grammar.h"

namespace dsinfer::structured {

struct JsonSchemaOptions {
  int max_whitespace = 2;  // bytes of [ \t\n] allowed between JSON tokens
  int max_ref_depth = 64;  // nested $ref / allOf expansion
  // Code points (BMP) that strings hold only as \uxxxx escapes, never raw (a forced tool call
  // keeps "｜" out of its JSON text: tool_call_grammar.h).
  CodePointSet escaped;
};

StatusOr<Element> CompileJsonSchema(GrammarBuilder& b, const nlohmann::ordered_json& schema,
                                    const JsonSchemaOptions& options = {});
// `schema`, the part of `root` at JSON pointer `path` (for errors); its $refs resolve in `root`
// (a tool's parameter is a subschema of the tool's parameters schema).
StatusOr<Element> CompileJsonSubschema(GrammarBuilder& b, const nlohmann::ordered_json& root,
                                       const nlohmann::ordered_json& schema,
                                       const std::string& path,
                                       const JsonSchemaOptions& options = {});
// Any JSON object (OpenAI's json_object mode).
Element JsonObjectElement(GrammarBuilder& b, const JsonSchemaOptions& options = {});

}  // namespace dsinfer::structured
