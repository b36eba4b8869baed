#include "request/output_constraint.h"

#include "structured/tool_call_grammar.h"

namespace dsinfer::request {

namespace {

Status BadToolChoice(const std::string& got) {
  return InvalidArgument(
      "\"tool_choice\" must be none, auto, required or "
      "{\"type\": \"function\", \"function\": {\"name\": ...}}" +
      got);
}

// The forced function of a tool_choice: "" for "required", the name for a named function;
// nullopt for none / auto / absent.
template <typename Json>
StatusOr<std::optional<std::string>> ForcedTool(const Json& body) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) {
    const std::string choice = it->template get<std::string>();
    if (choice == "required") return std::optional<std::string>(std::string());
    if (choice == "none" || choice == "auto") return std::optional<std::string>();
    return BadToolChoice(", got \"" + choice + "\"");
  }
  if (it->is_object() && it->value("type", "") == "function" && it->contains("function") &&
      (*it)["function"].is_object() && (*it)["function"].contains("name") &&
      (*it)["function"]["name"].is_string()) {
    const std::string name = (*it)["function"]["name"].template get<std::string>();
    if (name.empty()) return BadToolChoice(" (the function name is empty)");
    return std::optional<std::string>(name);
  }
  return BadToolChoice("");
}

template <typename Json>
StatusOr<structured::ConstraintSpec> Parse(const Json& body) {
  DSINFER_ASSIGN_OR_RETURN(std::optional<std::string> forced, ForcedTool(body));
  DSINFER_ASSIGN_OR_RETURN(structured::ConstraintSpec spec,
                           structured::ParseOutputConstraint(body));
  auto tools = body.find("tools");
  const bool has_tools = tools != body.end() && tools->is_array() && !tools->empty();
  bool parallel = true;
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && p->is_boolean())
    parallel = p->template get<bool>();
  if (!forced) {
    // Strict tools constrain a tool_choice auto answer, unless another constraint covers it all
    // (tool_choice none drops the tools).
    auto choice = body.find("tool_choice");
    const bool none = choice != body.end() && choice->is_string() && *choice == "none";
    if (spec.active() || !has_tools || none) return spec;
    return structured::StrictToolCallSpec(nlohmann::ordered_json(*tools), parallel);
  }
  const std::string what = forced->empty() ? "\"tool_choice\" \"required\""
                                           : "\"tool_choice\" naming \"" + *forced + "\"";
  if (spec.active()) {
    return InvalidArgument(what + " cannot be combined with another output constraint (" +
                           structured::ConstraintKindName(spec.kind) + ")");
  }
  if (!has_tools) return InvalidArgument(what + " needs a non-empty \"tools\" array");
  return structured::ToolCallSpec(nlohmann::ordered_json(*tools), *forced, parallel);
}

}  // namespace

StatusOr<structured::ConstraintSpec> ParseOutputConstraint(const nlohmann::json& body,
                                                           const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) return structured::ConstraintSpec();
  if (ordered != nullptr && ordered->is_object()) return Parse(*ordered);
  return Parse(body);
}

}  // namespace dsinfer::request
