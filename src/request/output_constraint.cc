#include "request/output_constraint.h"

namespace dsinfer::request {

namespace {

Status NotYet(const std::string& what) {
  return InvalidArgument(what + " is not supported yet (the tool-call grammar has not landed)");
}

}  // namespace

StatusOr<structured::ConstraintSpec> ParseOutputConstraint(const nlohmann::json& body,
                                                           const nlohmann::ordered_json* ordered) {
  structured::ConstraintSpec none;
  if (!body.is_object()) return none;
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      const std::string choice = it->get<std::string>();
      if (choice == "required") return NotYet("\"tool_choice\" \"required\"");
      if (choice != "none" && choice != "auto") {
        return InvalidArgument(
            "\"tool_choice\" must be none, auto, required or "
            "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"" +
            choice + "\"");
      }
    } else if (it->is_object() && it->value("type", "") == "function" && it->contains("function") &&
               (*it)["function"].is_object() && (*it)["function"].contains("name") &&
               (*it)["function"]["name"].is_string()) {
      return NotYet("\"tool_choice\" naming a function");
    } else {
      return InvalidArgument(
          "\"tool_choice\" must be none, auto, required or "
          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (ordered != nullptr && ordered->is_object())
    return structured::ParseOutputConstraint(*ordered);
  return structured::ParseOutputConstraint(body);
}

}  // namespace dsinfer::request
