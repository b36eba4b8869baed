// Forced tool calls (tool_choice "required" or a named function): the DeepSeek-V4 DSML tool-call
// block (recipe-v4.md §3.6) as a grammar, so the answer parses into tool_calls (§3.7) calling only
// the allowed tools with arguments that follow their JSON schemas:
//
//   \n\n<｜DSML｜tool_calls>\n
//   <｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="K" string="true">raw text</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="K2" string="false">JSON</｜DSML｜parameter>\n
//   </｜DSML｜invoke>\n            (more invokes: one per line; one only when not parallel)
//   </｜DSML｜tool_calls>
//
// "｜DSML｜" is the special token (vocabulary.h: kDsmlSlot), never its spelling in ordinary
// tokens. Parameters come in the schema's property order, the required ones always, the others
// optionally; properties the schema does not name are not generated. A parameter whose schema is a
// plain string (type "string", with minLength / maxLength at most) or a string enum / const is
// written raw (string="true"). Every other parameter is JSON (string="false") compiled by
// json_schema_compiler.h (so a string with a pattern or format is a JSON string literal). No
// parameter text holds "｜" (U+FF5C), so none can spell the markup (the recipe's parser finds
// tags in text): raw text never has it (an enum value with one is written as JSON), JSON strings
// write it as \uff5c. The block starts the answer (no content before it) and the constraint is
// complete after its last tag.
// Pure functions; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "structured/constraint_spec.h"
#include "structured/grammar.h"
#include "structured/json_schema_compiler.h"

namespace dsinfer::structured {

// The constraint of a forced tool call: `tools` is the request's OpenAI `tools` array (its own key
// order kept); `name` is the function a named tool_choice forces ("": any of the tools, i.e.
// "required"); `parallel` false allows exactly one invoke. InvalidArgument for malformed tools,
// duplicate or unwritable names, or a `name` that is not among them.
StatusOr<ConstraintSpec> ToolCallSpec(const nlohmann::ordered_json& tools, const std::string& name,
                                      bool parallel);

// Strict tools (`"strict": true` in a function) under tool_choice auto: the answer is free text
// that does not spell "｜DSML｜", then optionally the block, where the strict tools' parameters
// follow their schemas as above and the other tools take any parameters. kNone when no tool is
// strict. Errors as ToolCallSpec's.
StatusOr<ConstraintSpec> StrictToolCallSpec(const nlohmann::ordered_json& tools, bool parallel);

// `spec` (kToolCalls) with the DSML tag names of another dialect (recipe/dialect.h: DsmlNames;
// the default is V4's "tool_calls" / "invoke" / "parameter"). Other kinds are returned as they are.
ConstraintSpec WithDsmlNames(ConstraintSpec spec, std::string_view calls, std::string_view invoke,
                             std::string_view parameter);

// The grammar of a kToolCalls spec's text (as ToolCallSpec wrote it). Schemas the JSON compiler
// cannot take are its InvalidArgument / Unimplemented, naming the tool and the parameter.
StatusOr<Element> CompileToolCalls(GrammarBuilder& b, const std::string& spec_text,
                                   const JsonSchemaOptions& options = {});

}  // namespace dsinfer::structured
