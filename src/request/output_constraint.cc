#include "request/output_constraint.h"

namespace dsinfer::request {

namespace {

Status NotYet(const std::string& what) {
  return InvalidArgument(what + " is not supported yet (structured output has not landed)");
}

}  // namespace

StatusOr<OutputConstraint> ParseOutputConstraint(const nlohmann::json& body) {
  OutputConstraint none;
  if (!body.is_object()) return none;
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
      return InvalidArgument("\"response_format\" must be an object with a string \"type\"");
    }
    const std::string type = (*it)["type"].get<std::string>();
    if (type != "text") {
      if (type != "json_object" && type != "json_schema") {
        return InvalidArgument(
            "\"response_format\" type must be text, json_object or json_schema, "
            "got \"" +
            type + "\"");
      }
      return NotYet("\"response_format\" " + type);
    }
  }
  if (auto it = body.find("structured_outputs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("\"structured_outputs\" must be an object");
    return NotYet("\"structured_outputs\"");
  }
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
  return none;
}

}  // namespace dsinfer::request
