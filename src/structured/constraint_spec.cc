#include "structured/constraint_spec.h"

namespace dsinfer::structured {

const char* ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kNone:
      return "none";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kChoice:
      return "choice";
    case ConstraintKind::kGrammar:
      return "grammar";
    case ConstraintKind::kToolCalls:
      return "tool_calls";
  }
  return "none";
}

std::string ConstraintSpec::Key() const {
  std::string k = ConstraintKindName(kind);
  k += '\n';
  k += text;
  for (const auto& c : choices) {
    k += '\n';
    k += std::to_string(c.size());
    k += ':';
    k += c;
  }
  return k;
}

bool IsOutputConstraintKey(const std::string& key) {
  return key == "response_format" || key == "structured_outputs" || key == "guided_json" ||
         key == "guided_regex" || key == "guided_choice" || key == "guided_grammar";
}

namespace {

Status Bad(const std::string& key, const std::string& what) {
  return InvalidArgument("\"" + key + "\" " + what);
}

template <typename Json>
Status SchemaSpec(const Json& v, const std::string& key, ConstraintSpec* out) {
  out->kind = ConstraintKind::kJsonSchema;
  if (v.is_string()) {
    const auto parsed =
        Json::parse(v.template get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return Bad(key, "is not valid JSON schema text");
    out->text = parsed.dump();
  } else if (v.is_object() || v.is_boolean()) {
    out->text = v.dump();
  } else {
    return Bad(key, "must be a JSON schema (an object)");
  }
  return Status::Ok();
}

template <typename Json>
Status Choices(const Json& v, const std::string& key, ConstraintSpec* out) {
  if (!v.is_array() || v.empty()) return Bad(key, "must be a non-empty array of strings");
  out->kind = ConstraintKind::kChoice;
  for (const auto& c : v) {
    if (!c.is_string() || c.template get<std::string>().empty())
      return Bad(key, "must hold non-empty strings");
    out->choices.push_back(c.template get<std::string>());
  }
  return Status::Ok();
}

template <typename Json>
Status Text(const Json& v, const std::string& key, ConstraintKind kind, ConstraintSpec* out) {
  if (!v.is_string() || v.template get<std::string>().empty())
    return Bad(key, "must be a non-empty string");
  out->kind = kind;
  out->text = v.template get<std::string>();
  return Status::Ok();
}

template <typename Json>
Status ResponseFormat(const Json& v, ConstraintSpec* out) {
  const std::string key = "response_format";
  if (v.is_null()) return Status::Ok();
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    return Bad(key, "must be an object with a \"type\"");
  const std::string type = v["type"].template get<std::string>();
  for (const auto& [k, x] : v.items()) {
    if (k != "type" && k != "json_schema") return Bad(key, "has an unknown key \"" + k + "\"");
  }
  if (type == "text") return Status::Ok();
  if (type == "json_object") {
    out->kind = ConstraintKind::kJsonObject;
    return Status::Ok();
  }
  if (type != "json_schema")
    return Bad(key, "type must be \"text\", \"json_object\" or \"json_schema\"");
  if (!v.contains("json_schema") || !v["json_schema"].is_object()) {
    return Bad(key, "of type json_schema needs a \"json_schema\" object");
  }
  const auto& js = v["json_schema"];
  for (const auto& [k, x] : js.items()) {
    if (k != "name" && k != "schema" && k != "strict" && k != "description") {
      return Bad(key, "json_schema has an unknown key \"" + k + "\"");
    }
  }
  if (!js.contains("schema")) return Bad(key, "json_schema needs a \"schema\"");
  return SchemaSpec(js["schema"], key + ".json_schema.schema", out);
}

template <typename Json>
Status StructuredOutputs(const Json& v, ConstraintSpec* out) {
  const std::string key = "structured_outputs";
  if (v.is_null()) return Status::Ok();
  if (!v.is_object()) return Bad(key, "must be an object");
  int set = 0;
  for (const auto& [k, x] : v.items()) {
    if (x.is_null()) continue;
    const std::string sub = key + "." + k;
    if (k == "json") {
      DSINFER_RETURN_IF_ERROR(SchemaSpec(x, sub, out));
    } else if (k == "regex") {
      DSINFER_RETURN_IF_ERROR(Text(x, sub, ConstraintKind::kRegex, out));
    } else if (k == "grammar") {
      DSINFER_RETURN_IF_ERROR(Text(x, sub, ConstraintKind::kGrammar, out));
    } else if (k == "choice") {
      DSINFER_RETURN_IF_ERROR(Choices(x, sub, out));
    } else if (k == "json_object") {
      if (!x.is_boolean()) return Bad(sub, "must be true or false");
      if (!x.template get<bool>()) continue;
      out->kind = ConstraintKind::kJsonObject;
    } else {
      return Bad(key, "has an unsupported key \"" + k +
                          "\" (supported: json, regex, choice, grammar, json_object)");
    }
    ++set;
  }
  if (set > 1) return Bad(key, "must set exactly one of json, regex, choice, grammar, json_object");
  return Status::Ok();
}

template <typename Json>
StatusOr<ConstraintSpec> Parse(const Json& body) {
  ConstraintSpec spec;
  if (!body.is_object()) return spec;
  int sources = 0;
  for (const auto& [k, v] : body.items()) {
    if (!IsOutputConstraintKey(k) || v.is_null()) continue;
    ConstraintSpec one;
    if (k == "response_format") {
      DSINFER_RETURN_IF_ERROR(ResponseFormat(v, &one));
    } else if (k == "structured_outputs") {
      DSINFER_RETURN_IF_ERROR(StructuredOutputs(v, &one));
    } else if (k == "guided_json") {
      DSINFER_RETURN_IF_ERROR(SchemaSpec(v, k, &one));
    } else if (k == "guided_regex") {
      DSINFER_RETURN_IF_ERROR(Text(v, k, ConstraintKind::kRegex, &one));
    } else if (k == "guided_grammar") {
      DSINFER_RETURN_IF_ERROR(Text(v, k, ConstraintKind::kGrammar, &one));
    } else {
      DSINFER_RETURN_IF_ERROR(Choices(v, k, &one));
    }
    if (!one.active()) continue;
    if (++sources > 1) {
      return InvalidArgument(
          "a request may set one output constraint (response_format, structured_outputs or "
          "guided_*), not several");
    }
    spec = std::move(one);
  }
  return spec;
}

}  // namespace

StatusOr<ConstraintSpec> ParseOutputConstraint(const nlohmann::json& body) { return Parse(body); }
StatusOr<ConstraintSpec> ParseOutputConstraint(const nlohmann::ordered_json& body) {
  return Parse(body);
}

}  // namespace dsinfer::structured
