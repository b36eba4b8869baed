#include "structured/tool_call_grammar.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "structured/code_points.h"
#include "structured/vocabulary.h"

namespace dsinfer::structured {

namespace {

using Json = nlohmann::ordered_json;

constexpr uint32_t kFullwidthBar = 0xFF5C;  // "｜": the bars of the DSML token's spelling
constexpr std::string_view kFullwidthBarUtf8 = "\xEF\xBD\x9C";

// A name written between quotes in a DSML tag: the parser reads up to the next `"` or ">\n".
Status CheckTagName(const std::string& name, const std::string& what) {
  if (name.empty()) return InvalidArgument(what + " is empty");
  if (name.find_first_of("\"\n<>") != std::string::npos) {
    return InvalidArgument(what + " \"" + name +
                           "\" holds a character a DSML tag cannot carry (\", <, > or a newline)");
  }
  return Status::Ok();
}

Status Prefixed(const Status& s, const std::string& prefix) {
  return Status(s.code(), prefix + s.message());
}

bool IsAnnotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",      "description", "default",   "examples",    "$comment",
      "deprecated", "readOnly",    "writeOnly", "$schema",     "$id",
      "strict",     "example",     "$defs",     "definitions", "x-nullable"};
  return kAnnotations.count(k) > 0 || k.rfind("x-", 0) == 0;
}

// A parameter written raw (string="true"): the literal values of a string enum / const, or text of
// minLength..maxLength characters (max -1: unbounded). nullopt: the schema is not a plain string.
struct RawString {
  std::vector<std::string> literals;  // non-empty: one of these exactly
  int64_t min = 0;
  int64_t max = -1;
};

std::optional<RawString> AsRawString(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  for (const auto& [k, v] : s.items()) {
    if (k != "type" && k != "minLength" && k != "maxLength" && k != "enum" && k != "const" &&
        !IsAnnotation(k)) {
      return std::nullopt;
    }
  }
  bool typed_string = false;
  if (s.contains("type")) {
    const Json& t = s["type"];
    typed_string = (t.is_string() && t == "string") ||
                   (t.is_array() && t.size() == 1 && t[0].is_string() && t[0] == "string");
    if (!typed_string) return std::nullopt;
  }
  RawString raw;
  if (s.contains("const") || s.contains("enum")) {
    if (s.contains("minLength") || s.contains("maxLength")) return std::nullopt;
    if (s.contains("const") && s.contains("enum")) return std::nullopt;
    const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    if (!values.is_array() || values.empty()) return std::nullopt;
    for (const auto& v : values) {
      if (!v.is_string()) return std::nullopt;
      raw.literals.push_back(v.get<std::string>());
      // A bar is written only as JSON's \uff5c escape.
      if (raw.literals.back().find(kFullwidthBarUtf8) != std::string::npos) return std::nullopt;
    }
    return raw;
  }
  if (!typed_string) return std::nullopt;
  auto count = [&](const char* key, int64_t* out) {
    if (!s.contains(key)) return true;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0) return false;
    *out = s[key].get<int64_t>();
    return true;
  };
  if (!count("minLength", &raw.min) || !count("maxLength", &raw.max)) return std::nullopt;
  if (raw.max >= 0 && raw.max < raw.min) return std::nullopt;  // the JSON compiler reports it
  return raw;
}

class ToolCallCompiler {
 public:
  ToolCallCompiler(GrammarBuilder& b, const Json& spec, const JsonSchemaOptions& o) : b_(b), o_(o) {
    calls_ = spec.value("calls", std::string("tool_calls"));
    invoke_ = spec.value("invoke", std::string("invoke"));
    parameter_ = spec.value("parameter", std::string("parameter"));
  }

  // Forced: the block. Optional (strict tools under tool_choice auto): content, then the block or
  // nothing; only the strict tools' parameters follow their schemas.
  StatusOr<Element> Answer(const Json& spec) {
    const bool optional = spec.value("optional", false);
    DSINFER_ASSIGN_OR_RETURN(Element block, Block(spec, optional));
    if (!optional) return block;
    return b_.Seq({Content(), b_.Optional(block)}, "answer");
  }

 private:
  StatusOr<Element> Block(const Json& spec, bool optional) {
    std::vector<std::vector<Element>> invokes;
    const std::string only = spec.value("name", std::string());
    for (const Json& fn : spec["tools"]) {
      const std::string name = fn["name"].get<std::string>();
      if (!only.empty() && name != only) continue;
      if (optional && !fn.value("strict", false)) {
        invokes.push_back({AnyInvoke(name)});
        continue;
      }
      DSINFER_ASSIGN_OR_RETURN(Element e, Invoke(fn));
      invokes.push_back({e});
    }
    if (invokes.empty()) return InvalidArgument("no tool may be called");
    const Element invoke = b_.Choice(std::move(invokes), "invoke");
    Element all = invoke;
    if (spec.value("parallel", true)) {
      std::vector<Element> more = b_.LiteralSeq("\n");
      more.push_back(invoke);
      all = b_.Seq({invoke, b_.Star(b_.Seq(std::move(more), "next_invoke"))}, "invokes");
    }
    std::vector<Element> seq = Open("\n\n", calls_ + ">\n");
    seq.push_back(all);
    Append(&seq, Close("\n", calls_ + ">"));
    DSINFER_RETURN_IF_ERROR(b_.status());
    return b_.Seq(std::move(seq), "tool_calls");
  }

  // Text that does not spell "｜DSML｜" (so the parser cannot take any of it for markup; the DSML
  // token itself is never text): a matcher of that word over code points, one rule per matched
  // prefix length, each free to end.
  Element Content() {
    const std::vector<uint32_t> word = {kFullwidthBar, 'D', 'S', 'M', 'L', kFullwidthBar};
    const size_t n = word.size();
    std::vector<int32_t> rules(n);
    for (size_t k = 0; k < n; ++k) rules[k] = b_.NewRule("content");
    const CodePointSet all = CodePointSet::All();
    const CodePointSet bar = CodePointSet::Of(kFullwidthBar);
    for (size_t k = 0; k < n; ++k) {
      const int32_t r = rules[k];
      b_.AddAlt(r, {});
      CodePointSet other = all.Minus(bar);
      if (k + 1 < n) {  // the next letter of the word (the last bar ends it: not allowed)
        const CodePointSet next = CodePointSet::Of(word[k]);
        if (k > 0) {
          b_.AddAlt(r, {Utf8Element(b_, next), GrammarBuilder::Ref(rules[k + 1])});
          other = other.Minus(next);
        }
      }
      if (k == 0) {
        b_.AddAlt(r, {Utf8Element(b_, bar), GrammarBuilder::Ref(rules[1])});
      } else if (k + 1 < n) {
        b_.AddAlt(r, {Utf8Element(b_, bar), GrammarBuilder::Ref(rules[1])});
      }
      b_.AddAlt(r, {Utf8Element(b_, other), GrammarBuilder::Ref(rules[0])});
    }
    return GrammarBuilder::Ref(rules[0]);
  }

  // An invoke of `name` (not strict) with any parameters: names without quotes, newlines, angle
  // brackets or bars; raw text or any JSON value.
  Element AnyInvoke(const std::string& name) {
    if (!any_params_) {
      CodePointSet name_chars = CodePointSet::All().Minus(CodePointSet::Of(kFullwidthBar));
      for (uint32_t c : {'"', '\n', '<', '>'}) name_chars = name_chars.Minus(CodePointSet::Of(c));
      const Element key = b_.Repeat(Utf8Element(b_, name_chars), 1, -1);
      static const Json kTrue = true;
      const Element json = CompileJsonSubschema(b_, kTrue, kTrue, "#", o_).value();  // any value
      std::vector<Element> raw = b_.LiteralSeq("\" string=\"true\">");
      raw.push_back(b_.Star(RawChar()));
      std::vector<Element> other = b_.LiteralSeq("\" string=\"false\">");
      other.push_back(json);
      std::vector<Element> param = Open("", parameter_ + " name=\"");
      param.push_back(key);
      param.push_back(b_.Choice({std::move(raw), std::move(other)}, "any_value"));
      Append(&param, Close("", parameter_ + ">"));
      const Element one = b_.Seq(std::move(param), "any_parameter");
      any_params_ = b_.SeparatedList(one, b_.LiteralSeq("\n"), 0, -1);
    }
    std::vector<Element> seq = Open("", invoke_ + " name=\"" + name + "\">\n");
    seq.push_back(*any_params_);
    Append(&seq, Close("\n", invoke_ + ">"));
    return b_.Seq(std::move(seq), "any_tool");
  }

  Element RawChar() {
    if (!raw_char_) {
      raw_char_ = Utf8Element(b_, CodePointSet::All().Minus(CodePointSet::Of(kFullwidthBar)));
    }
    return *raw_char_;
  }

  // `before` "<" DSML `tag` and "</" DSML `tag`.
  std::vector<Element> Open(const std::string& before, const std::string& tag) {
    return Tag(before + "<", tag);
  }
  std::vector<Element> Close(const std::string& before, const std::string& tag) {
    return Tag(before + "</", tag);
  }
  std::vector<Element> Tag(const std::string& lead, const std::string& tag) {
    std::vector<Element> seq = b_.LiteralSeq(lead);
    seq.push_back(Dsml());
    Append(&seq, b_.LiteralSeq(tag));
    return seq;
  }
  Element Dsml() { return b_.Byte(SpecialTokenByte(kDsmlSlot)); }
  static void Append(std::vector<Element>* seq, const std::vector<Element>& more) {
    seq->insert(seq->end(), more.begin(), more.end());
  }

  StatusOr<Element> Invoke(const Json& fn) {
    const std::string name = fn["name"].get<std::string>();
    const Json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"]
                                                                                 : Json::object();
    auto params_or = Params(params);
    if (!params_or.ok()) return Prefixed(params_or.status(), "tool \"" + name + "\": ");
    std::vector<Element> seq = Open("", invoke_ + " name=\"" + name + "\">\n");
    seq.push_back(*params_or);
    Append(&seq, Close("\n", invoke_ + ">"));
    return b_.Seq(std::move(seq), "tool");
  }

  // The parameters of one invoke: "" or parameter ("\n" parameter)*, in property order.
  StatusOr<Element> Params(const Json& s) {
    if (s.is_boolean() && s.get<bool>()) return b_.Epsilon();
    if (!s.is_object()) return InvalidArgument("\"parameters\" must be a JSON schema object");
    static const std::set<std::string> kKeys = {
        "type", "properties", "required", "additionalProperties", "minProperties", "maxProperties"};
    for (const auto& [k, v] : s.items()) {
      if (!kKeys.count(k) && !IsAnnotation(k)) {
        return Unimplemented("\"" + k +
                             "\" at the top of \"parameters\" is not supported for forced tool "
                             "calls (an object schema with properties is)");
      }
    }
    if (s.contains("type") && !(s["type"].is_string() && s["type"] == "object")) {
      return InvalidArgument("\"parameters\" must have type \"object\"");
    }
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return InvalidArgument("\"properties\" must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return InvalidArgument("\"required\" must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return InvalidArgument("\"required\" must hold strings");
        // Compared as strings (json == string is ambiguous under C++20 with newer nlohmann-json).
        const std::string name = r.get<std::string>();
        if (std::find(required.begin(), required.end(), name) == required.end()) {
          required.push_back(name);
        }
      }
    }
    const Json additional =
        s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    static const Json kTrue = true;
    std::vector<std::pair<std::string, const Json*>> list;
    for (const auto& [k, sub] : props.items()) list.push_back({k, &sub});
    for (const auto& r : required) {
      if (props.contains(r)) continue;
      if (additional == false)
        return InvalidArgument("required property '" + r + "' is not allowed");
      list.push_back({r, additional.is_object() ? &additional : &kTrue});
    }
    const auto num_required = static_cast<int64_t>(required.size());
    if (s.contains("minProperties") && s["minProperties"].is_number_integer() &&
        s["minProperties"].get<int64_t>() > num_required) {
      return Unimplemented("minProperties above the required count");
    }
    if (s.contains("maxProperties") && s["maxProperties"].is_number_integer() &&
        s["maxProperties"].get<int64_t>() < static_cast<int64_t>(list.size())) {
      return Unimplemented("maxProperties below the number of properties");
    }
    const size_t n = list.size();
    std::vector<Element> kv(n);
    std::vector<bool> is_required(n);
    for (size_t i = 0; i < n; ++i) {
      const std::string& key = list[i].first;
      DSINFER_RETURN_IF_ERROR(CheckTagName(key, "the parameter name"));
      DSINFER_ASSIGN_OR_RETURN(kv[i], Param(s, key, *list[i].second));
      is_required[i] = std::find(required.begin(), required.end(), key) != required.end();
    }
    // The parameters in order, the optional ones may be left out; a newline between two.
    return b_.OrderedOptionalList(kv, is_required, b_.LiteralSeq("\n"), "params");
  }

  StatusOr<Element> Param(const Json& root, const std::string& key, const Json& schema) {
    const std::optional<RawString> raw = AsRawString(schema);
    Element value;
    if (raw && !raw->literals.empty()) {
      std::vector<std::vector<Element>> alts;
      for (const auto& l : raw->literals) alts.push_back(b_.LiteralSeq(l));
      value = b_.Choice(std::move(alts), "raw_enum");
    } else if (raw) {
      value = b_.Repeat(RawChar(), raw->min, raw->max);
    } else {
      auto json = CompileJsonSubschema(b_, root, schema, "#/properties/" + key, o_);
      if (!json.ok()) return Prefixed(json.status(), "parameter \"" + key + "\": ");
      value = *json;
    }
    std::vector<Element> seq =
        Open("", parameter_ + " name=\"" + key + "\" string=\"" + (raw ? "true" : "false") + "\">");
    seq.push_back(value);
    Append(&seq, Close("", parameter_ + ">"));
    return b_.Seq(std::move(seq), "parameter");
  }

  GrammarBuilder& b_;
  JsonSchemaOptions o_;
  std::string calls_, invoke_, parameter_;
  std::optional<Element> raw_char_;
  std::optional<Element> any_params_;
};

}  // namespace

namespace {

// The spec of the tools (`optional`: strict tools under tool_choice auto).
StatusOr<ConstraintSpec> Spec(const nlohmann::ordered_json& tools, const std::string& name,
                              bool parallel, bool optional) {
  if (!tools.is_array() || tools.empty()) {
    return InvalidArgument("a forced tool call needs a non-empty \"tools\" array");
  }
  Json functions = Json::array();
  std::set<std::string> names;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        (t.contains("type") && t["type"] != "function")) {
      return InvalidArgument(
          "\"tools\" entries must be {\"type\": \"function\", \"function\": {...}}");
    }
    const Json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return InvalidArgument("a tool's function needs a string \"name\"");
    const std::string n = fn["name"].get<std::string>();
    DSINFER_RETURN_IF_ERROR(CheckTagName(n, "the tool name"));
    if (!names.insert(n).second) return InvalidArgument("two tools are named \"" + n + "\"");
    Json f = {{"name", n}};
    if (fn.contains("parameters") && !fn["parameters"].is_null())
      f["parameters"] = fn["parameters"];
    if (optional) f["strict"] = fn.contains("strict") && fn["strict"] == true;
    functions.push_back(std::move(f));
  }
  if (!name.empty() && !names.count(name)) {
    return InvalidArgument("\"tool_choice\" names the function \"" + name +
                           "\", which is not in \"tools\"");
  }
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kToolCalls;
  Json text = {{"tools", std::move(functions)}, {"name", name}, {"parallel", parallel}};
  if (optional) text["optional"] = true;
  spec.text = text.dump();
  return spec;
}

}  // namespace

StatusOr<ConstraintSpec> ToolCallSpec(const nlohmann::ordered_json& tools, const std::string& name,
                                      bool parallel) {
  return Spec(tools, name, parallel, /*optional=*/false);
}

StatusOr<ConstraintSpec> StrictToolCallSpec(const nlohmann::ordered_json& tools, bool parallel) {
  bool any_strict = false;
  if (tools.is_array()) {
    for (const auto& t : tools) {
      any_strict |= t.is_object() && t.contains("function") && t["function"].is_object() &&
                    t["function"].contains("strict") && t["function"]["strict"] == true;
    }
  }
  if (!any_strict) return ConstraintSpec();
  return Spec(tools, "", parallel, /*optional=*/true);
}

ConstraintSpec WithDsmlNames(ConstraintSpec spec, std::string_view calls, std::string_view invoke,
                             std::string_view parameter) {
  if (spec.kind != ConstraintKind::kToolCalls) return spec;
  Json text = Json::parse(spec.text, nullptr, /*allow_exceptions=*/false);
  if (!text.is_object()) return spec;  // CompileToolCalls reports it
  text["calls"] = std::string(calls);
  text["invoke"] = std::string(invoke);
  text["parameter"] = std::string(parameter);
  spec.text = text.dump();
  return spec;
}

StatusOr<Element> CompileToolCalls(GrammarBuilder& b, const std::string& spec_text,
                                   const JsonSchemaOptions& options) {
  const Json spec = Json::parse(spec_text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object() || !spec.contains("tools") ||
      !spec["tools"].is_array()) {
    return InvalidArgument("a tool-call constraint must be {\"tools\": [...], ...}");
  }
  for (const Json& fn : spec["tools"]) {
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string())
      return InvalidArgument("a tool-call constraint's tools need string names");
  }
  JsonSchemaOptions json = options;
  json.escaped.Add(kFullwidthBar, kFullwidthBar);  // JSON strings write "｜" as \uff5c
  ToolCallCompiler c(b, spec, json);
  return c.Answer(spec);
}

}  // namespace dsinfer::structured
