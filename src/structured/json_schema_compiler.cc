#include "structured/json_schema_compiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "structured/code_points.h"
#include "structured/json_formats.h"
#include "structured/json_number.h"
#include "structured/json_schema_merge.h"
#include "structured/regex_compiler.h"

namespace dsinfer::structured {

namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

class Compiler {
 public:
  Compiler(GrammarBuilder& b, const Json& root, const JsonSchemaOptions& o)
      : b_(b), root_(root), o_(o) {}

  // The JSON text of a literal value, with the escaped code points as \uxxxx (raw UTF-8 of a
  // non-ASCII code point occurs only inside strings of a dump).
  std::string Literal(const Json& v) const {
    std::string text = Dump(v);
    for (auto [lo, hi] : o_.escaped.ranges()) {
      for (uint32_t c = lo; c <= hi && c <= 0xFFFF; ++c) {
        if (c < 0x80) continue;
        const std::string raw = EncodeUtf8(c);
        char esc[8];
        std::snprintf(esc, sizeof(esc), "\\u%04x", c);
        for (size_t at = text.find(raw); at != std::string::npos; at = text.find(raw, at + 6))
          text.replace(at, raw.size(), esc);
      }
    }
    return text;
  }

  StatusOr<Element> Compile(const Json& s, const std::string& path, int depth) {
    if (depth > o_.max_ref_depth) {
      return InvalidArgument("schema nesting or $ref expansion deeper than " +
                             std::to_string(o_.max_ref_depth) + " at " + path);
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return InvalidArgument("the schema at " + path + " is false: nothing satisfies it");
    }
    if (!s.is_object())
      return InvalidArgument("the schema at " + path + " must be an object or a boolean");
    DSINFER_RETURN_IF_ERROR(CheckKeywords(s, path));
    if (s.contains("$ref") && !HasValidationKeywords(s, {"$ref"}))
      return CompileRef(s["$ref"], path, depth);
    if (s.contains("$ref") || s.contains("allOf")) {
      DSINFER_ASSIGN_OR_RETURN(Json flat, Flatten(s, root_, path, depth));
      return Compile(flat, path, depth + 1);
    }
    if (s.contains("anyOf") && s.contains("oneOf")) {
      return Unimplemented("anyOf together with oneOf at " + path);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      return CompileBranches(s, key, path, depth);
    }
    if (s.contains("const")) return Value(s["const"], s, path);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return InvalidArgument("enum at " + path + " must be a non-empty array");
      std::vector<std::vector<Element>> alts;
      for (const auto& v : s["enum"]) {
        if (TypeMatches(s, v)) alts.push_back(b_.LiteralSeq(Literal(v)));
      }
      if (alts.empty())
        return InvalidArgument("no enum value at " + path + " has the schema's type");
      return b_.Choice(std::move(alts), "enum");
    }
    DSINFER_ASSIGN_OR_RETURN(std::vector<std::string> types, TypesOf(s, path));
    std::vector<std::vector<Element>> alts;
    for (const std::string& t : types) {
      Element e;
      if (t == "object") {
        DSINFER_ASSIGN_OR_RETURN(e, Object(s, path, depth));
      } else if (t == "array") {
        DSINFER_ASSIGN_OR_RETURN(e, Array(s, path, depth));
      } else if (t == "string") {
        DSINFER_ASSIGN_OR_RETURN(e, String(s, path));
      } else if (t == "integer" || t == "number") {
        NumberBounds nb;
        DSINFER_RETURN_IF_ERROR(Bounds(s, path, &nb));
        if (t == "integer") {
          DSINFER_ASSIGN_OR_RETURN(e, IntegerElement(b_, nb));
        } else {
          DSINFER_ASSIGN_OR_RETURN(e, NumberElement(b_, nb));
        }
      } else if (t == "boolean") {
        e = b_.Choice({b_.LiteralSeq("true"), b_.LiteralSeq("false")}, "boolean");
      } else {
        e = b_.Literal("null");
      }
      alts.push_back({e});
    }
    DSINFER_RETURN_IF_ERROR(b_.status());
    return b_.Choice(std::move(alts), "value");
  }

  Element AnyValue() {
    if (any_value_) return *any_value_;
    const int32_t value = b_.NewRule("any_value");
    any_value_ = GrammarBuilder::Ref(value);
    const Element object = Members(AnyString(), *any_value_, 0, -1);
    const Element array = b_.Seq(
        {b_.Byte('['), Ws(), b_.SeparatedList(*any_value_, Comma(), 0, -1), Ws(), b_.Byte(']')},
        "any_array");
    const Element number = NumberElement(b_, {}).value();  // unbounded: cannot fail
    for (Element e : {object, array, AnyString(), number}) b_.AddAlt(value, {e});
    for (const char* lit : {"true", "false", "null"}) b_.AddAlt(value, b_.LiteralSeq(lit));
    return *any_value_;
  }

  // "{" members "}" with string keys `key` and values `value`, between min and max members.
  Element Members(Element key, Element value, int64_t min, int64_t max) {
    const Element member = b_.Seq({key, Ws(), b_.Byte(':'), Ws(), value}, "member");
    return b_.Seq(
        {b_.Byte('{'), Ws(), b_.SeparatedList(member, Comma(), min, max), Ws(), b_.Byte('}')},
        "object");
  }

 private:
  Element Ws() {
    if (!ws_)
      ws_ = b_.Repeat(b_.Bytes([] {
        ByteSet s;
        s.Add(' ');
        s.Add('\t');
        s.Add('\n');
        return s;
      }()),
                      0, o_.max_whitespace);
    return *ws_;
  }
  std::vector<Element> Comma() { return {Ws(), b_.Byte(','), Ws()}; }
  Element AnyChar() {
    if (!any_char_) any_char_ = JsonCharElement(b_, CodePointSet::All(), o_.escaped);
    return *any_char_;
  }
  Element AnyString() {
    if (!any_string_)
      any_string_ = b_.Seq({b_.Byte('"'), b_.Star(AnyChar()), b_.Byte('"')}, "string");
    return *any_string_;
  }

  static bool IsAnnotation(const std::string& k) {
    static const std::set<std::string> kAnnotations = {
        "title",     "description", "default",        "examples",        "$schema",
        "$id",       "id",          "$comment",       "deprecated",      "readOnly",
        "writeOnly", "$defs",       "definitions",    "contentEncoding", "contentMediaType",
        "$anchor",   "$vocabulary", "$dynamicAnchor", "discriminator",   "example",
        "strict",    "name",        "nullable_hint"};
    return kAnnotations.count(k) || k.rfind("x-", 0) == 0;
  }
  static bool HasValidationKeywords(const Json& s, const std::set<std::string>& except) {
    for (const auto& [k, v] : s.items()) {
      if (!except.count(k) && !IsAnnotation(k)) return true;
    }
    return false;
  }

  Status CheckKeywords(const Json& s, const std::string& path) {
    static const std::set<std::string> kUnsupported = {"not",
                                                       "if",
                                                       "then",
                                                       "else",
                                                       "dependentRequired",
                                                       "dependentSchemas",
                                                       "dependencies",
                                                       "patternProperties",
                                                       "propertyNames",
                                                       "unevaluatedProperties",
                                                       "unevaluatedItems",
                                                       "contains",
                                                       "minContains",
                                                       "maxContains",
                                                       "multipleOf",
                                                       "$dynamicRef",
                                                       "$recursiveRef"};
    for (const auto& [k, v] : s.items()) {
      if (kUnsupported.count(k)) {
        return Unimplemented("JSON schema keyword '" + k + "' is not supported (at " + path + ")");
      }
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] == true) {
      if (!(s.contains("maxItems") && s["maxItems"].is_number() &&
            s["maxItems"].get<double>() <= 1)) {
        return Unimplemented("JSON schema keyword 'uniqueItems' is not supported (at " + path +
                             ")");
      }
    }
    return Status::Ok();
  }

  StatusOr<Element> CompileRef(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return InvalidArgument("$ref at " + path + " must be a string");
    const std::string r = ref.get<std::string>();
    auto it = ref_rules_.find(r);
    if (it != ref_rules_.end()) return GrammarBuilder::Ref(it->second);
    DSINFER_ASSIGN_OR_RETURN(const Json* target, ResolveRef(root_, r, path));
    const int32_t rule = b_.NewRule("ref:" + r);
    ref_rules_[r] = rule;
    DSINFER_ASSIGN_OR_RETURN(Element e, Compile(*target, r, depth + 1));
    b_.AddAlt(rule, {e});
    return GrammarBuilder::Ref(rule);
  }

  StatusOr<Element> CompileBranches(const Json& s, const char* key, const std::string& path,
                                    int depth) {
    const Json& branches = s[key];
    if (!branches.is_array() || branches.empty()) {
      return InvalidArgument(std::string(key) + " at " + path + " must be a non-empty array");
    }
    Json rest = s;
    rest.erase(key);
    const bool merge = HasValidationKeywords(rest, {});
    std::vector<Json> flat;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bpath = path + "/" + key + "/" + std::to_string(i);
      if (merge || std::string(key) == "oneOf") {
        DSINFER_ASSIGN_OR_RETURN(Json f, Flatten(branches[i], root_, bpath, depth));
        if (merge) {
          DSINFER_ASSIGN_OR_RETURN(f, MergeSchemas(rest, f, root_, bpath, depth));
        }
        flat.push_back(std::move(f));
      } else {
        flat.push_back(branches[i]);
      }
    }
    if (std::string(key) == "oneOf") {
      for (size_t i = 0; i < flat.size(); ++i) {
        for (size_t j = i + 1; j < flat.size(); ++j) {
          if (!ProvablyDisjoint(flat[i], flat[j], root_)) {
            return Unimplemented(
                "oneOf at " + path + " has branches " + std::to_string(i) + " and " +
                std::to_string(j) +
                " that may both match (only oneOf with provably disjoint branches is supported)");
          }
        }
      }
    }
    std::vector<std::vector<Element>> alts;
    for (size_t i = 0; i < flat.size(); ++i) {
      DSINFER_ASSIGN_OR_RETURN(
          Element e, Compile(flat[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
      alts.push_back({e});
    }
    return b_.Choice(std::move(alts), key);
  }

  StatusOr<Element> Value(const Json& v, const Json& s, const std::string& path) {
    if (!TypeMatches(s, v))
      return InvalidArgument("const at " + path + " does not have the schema's type");
    return b_.Literal(Literal(v));
  }

  static bool TypeMatches(const Json& s, const Json& v) {
    if (!s.contains("type")) return true;
    std::vector<std::string> types;
    if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
    if (s["type"].is_array()) {
      for (const auto& t : s["type"]) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    for (const auto& t : types) {
      if (JsonTypeMatches(t, v)) return true;
    }
    return false;
  }

  StatusOr<std::vector<std::string>> TypesOf(const Json& s, const std::string& path) {
    static const std::vector<std::string> kAll = {"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      if (t.is_array()) {
        for (const auto& x : t) {
          if (!x.is_string())
            return InvalidArgument("type at " + path + " must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      }
      if (types.empty())
        return InvalidArgument("type at " + path + " must be a string or a non-empty array");
      for (const auto& x : types) {
        if (std::find(kAll.begin(), kAll.end(), x) == kAll.end()) {
          return InvalidArgument("unknown type '" + x + "' at " + path);
        }
      }
      if (std::count(types.begin(), types.end(), "number") &&
          std::count(types.begin(), types.end(), "integer")) {
        types.erase(std::find(types.begin(), types.end(), "integer"));
      }
      return types;
    }
    auto has = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) {
        if (s.contains(k)) return true;
      }
      return false;
    };
    if (has({"properties", "required", "additionalProperties", "minProperties", "maxProperties"}))
      types.push_back("object");
    if (has({"items", "prefixItems", "minItems", "maxItems", "additionalItems"}))
      types.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
      types.push_back("number");
    if (types.empty())
      return std::vector<std::string>{"object", "array", "string", "number", "boolean", "null"};
    return types;
  }

  static StatusOr<int64_t> Count(const Json& s, const char* key, int64_t dflt,
                                 const std::string& path) {
    if (!s.contains(key)) return dflt;
    const Json& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>())) {
      return InvalidArgument(std::string(key) + " at " + path + " must be a non-negative integer");
    }
    if (v.get<double>() > 1e6)
      return InvalidArgument(std::string(key) + " at " + path + " is too large");
    return static_cast<int64_t>(v.get<double>());
  }

  Status Bounds(const Json& s, const std::string& path, NumberBounds* nb) {
    auto num = [&](const char* key, std::optional<double>* out) -> Status {
      if (!s.contains(key)) return Status::Ok();
      if (s[key].is_boolean()) return Status::Ok();  // draft 4 exclusive flags, read below
      if (!s[key].is_number())
        return InvalidArgument(std::string(key) + " at " + path + " must be a number");
      *out = s[key].get<double>();
      return Status::Ok();
    };
    std::optional<double> emin, emax;
    DSINFER_RETURN_IF_ERROR(num("minimum", &nb->lo));
    DSINFER_RETURN_IF_ERROR(num("maximum", &nb->hi));
    DSINFER_RETURN_IF_ERROR(num("exclusiveMinimum", &emin));
    DSINFER_RETURN_IF_ERROR(num("exclusiveMaximum", &emax));
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true) nb->lo_exclusive = true;
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"] == true) nb->hi_exclusive = true;
    if (emin && (!nb->lo || *emin >= *nb->lo)) {
      nb->lo = emin;
      nb->lo_exclusive = true;
    }
    if (emax && (!nb->hi || *emax <= *nb->hi)) {
      nb->hi = emax;
      nb->hi_exclusive = true;
    }
    return Status::Ok();
  }

  StatusOr<Element> String(const Json& s, const std::string& path) {
    DSINFER_ASSIGN_OR_RETURN(int64_t min, Count(s, "minLength", 0, path));
    DSINFER_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxLength", -1, path));
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    std::string regex;
    if (s.contains("format")) {
      if (!s["format"].is_string())
        return InvalidArgument("format at " + path + " must be a string");
      auto r = FormatRegex(s["format"].get<std::string>());
      if (!r)
        return Unimplemented("string format '" + s["format"].get<std::string>() +
                             "' is not supported (at " + path + ")");
      regex = *r;
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string())
        return InvalidArgument("pattern at " + path + " must be a string");
      if (!regex.empty()) return Unimplemented("pattern together with format at " + path);
      regex = s["pattern"].get<std::string>();
    }
    if (!regex.empty()) {
      if (lengths)
        return Unimplemented("pattern or format together with minLength/maxLength at " + path);
      DSINFER_ASSIGN_OR_RETURN(Element body, CompileRegex(b_, regex, RegexMode::kJsonPattern,
                                                          /*max_repeat=*/10000, o_.escaped));
      return b_.Seq({b_.Byte('"'), body, b_.Byte('"')}, "pattern_string");
    }
    if (max >= 0 && max < min) return InvalidArgument("maxLength < minLength at " + path);
    if (!lengths) return AnyString();
    return b_.Seq({b_.Byte('"'), b_.Repeat(AnyChar(), min, max), b_.Byte('"')}, "string");
  }

  StatusOr<Element> Object(const Json& s, const std::string& path, int depth) {
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return InvalidArgument("properties at " + path + " must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array())
        return InvalidArgument("required at " + path + " must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return InvalidArgument("required at " + path + " must hold strings");
        if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end()) {
          required.push_back(r.get<std::string>());
        }
      }
    }
    const Json additional =
        s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    DSINFER_ASSIGN_OR_RETURN(int64_t min_props, Count(s, "minProperties", 0, path));
    DSINFER_ASSIGN_OR_RETURN(int64_t max_props, Count(s, "maxProperties", -1, path));
    if (props.empty() && required.empty()) {
      if (additional == false) {
        if (min_props > 0)
          return InvalidArgument("minProperties > 0 with no allowed property at " + path);
        return b_.Seq({b_.Byte('{'), Ws(), b_.Byte('}')}, "empty_object");
      }
      if (min_props > 1) {
        // Generated keys could repeat, and a repeated key counts once.
        return Unimplemented("minProperties above 1 on an object without named properties at " +
                             path);
      }
      DSINFER_ASSIGN_OR_RETURN(Element value,
                               Compile(additional, path + "/additionalProperties", depth + 1));
      return Members(AnyString(), value, min_props, max_props);
    }
    // Named properties in schema order, then required names the schema does not describe.
    std::vector<std::pair<std::string, const Json*>> list;
    for (const auto& [name, sub] : props.items()) list.push_back({name, &sub});
    static const Json kTrue = true;
    for (const auto& r : required) {
      if (!props.contains(r)) {
        if (additional == false)
          return InvalidArgument("required property '" + r + "' is not allowed at " + path);
        list.push_back({r, additional.is_object() ? &additional : &kTrue});
      }
    }
    const int64_t num_required = static_cast<int64_t>(required.size());
    if (min_props > num_required)
      return Unimplemented("minProperties above the required count at " + path);
    if (max_props >= 0 && max_props < static_cast<int64_t>(list.size())) {
      return Unimplemented("maxProperties below the number of properties at " + path);
    }
    const size_t n = list.size();
    std::vector<Element> kv(n);
    std::vector<bool> is_required(n);
    for (size_t i = 0; i < n; ++i) {
      DSINFER_ASSIGN_OR_RETURN(
          Element v, Compile(*list[i].second, path + "/properties/" + list[i].first, depth + 1));
      kv[i] = b_.Seq({b_.Literal(Literal(Json(list[i].first))), Ws(), b_.Byte(':'), Ws(), v},
                     "property");
      is_required[i] = std::find(required.begin(), required.end(), list[i].first) != required.end();
    }
    // The properties in order, the optional ones may be left out; a comma between two.
    const Element members = b_.OrderedOptionalList(kv, is_required, Comma(), "props");
    return b_.Seq({b_.Byte('{'), Ws(), members, Ws(), b_.Byte('}')}, "object");
  }

  StatusOr<Element> Array(const Json& s, const std::string& path, int depth) {
    DSINFER_ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", 0, path));
    DSINFER_ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", -1, path));
    if (max >= 0 && max < min) return InvalidArgument("maxItems < minItems at " + path);
    const Json* prefix = nullptr;
    Json items = true;
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      if (s.contains("items")) items = s["items"];
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = &s["items"];
      if (s.contains("additionalItems")) items = s["additionalItems"];
    } else if (s.contains("items")) {
      items = s["items"];
    }
    if (prefix && !prefix->is_array())
      return InvalidArgument("prefixItems at " + path + " must be an array");
    const int64_t num_prefix = prefix ? static_cast<int64_t>(prefix->size()) : 0;
    const int64_t k = max >= 0 ? std::min(num_prefix, max) : num_prefix;
    std::vector<Element> seq = {b_.Byte('['), Ws()};
    for (int64_t i = 0; i < k; ++i) {
      DSINFER_ASSIGN_OR_RETURN(
          Element e, Compile((*prefix)[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
      if (i > 0) {
        for (Element c : Comma()) seq.push_back(c);
      }
      seq.push_back(e);
    }
    const bool extras_allowed = items != false && k == num_prefix;
    const int64_t extra_min = std::max<int64_t>(0, min - k);
    const int64_t extra_max = !extras_allowed ? 0 : max < 0 ? -1 : max - k;
    if (extra_min > 0 && (extra_max == 0))
      return InvalidArgument("minItems cannot be met at " + path);
    if (extra_max != 0) {
      DSINFER_ASSIGN_OR_RETURN(Element item, Compile(items, path + "/items", depth + 1));
      if (k == 0) {
        seq.push_back(b_.SeparatedList(item, Comma(), extra_min, extra_max));
      } else {
        std::vector<Element> more = Comma();
        more.push_back(item);
        seq.push_back(b_.Repeat(b_.Seq(std::move(more), "item"), extra_min, extra_max));
      }
    }
    seq.push_back(Ws());
    seq.push_back(b_.Byte(']'));
    return b_.Seq(std::move(seq), "array");
  }

  GrammarBuilder& b_;
  const Json& root_;
  JsonSchemaOptions o_;
  std::map<std::string, int32_t> ref_rules_;
  std::optional<Element> ws_, any_char_, any_string_, any_value_;
};

}  // namespace

StatusOr<Element> CompileJsonSchema(GrammarBuilder& b, const nlohmann::ordered_json& schema,
                                    const JsonSchemaOptions& options) {
  Compiler c(b, schema, options);
  return c.Compile(schema, "#", 0);
}

StatusOr<Element> CompileJsonSubschema(GrammarBuilder& b, const nlohmann::ordered_json& root,
                                       const nlohmann::ordered_json& schema,
                                       const std::string& path, const JsonSchemaOptions& options) {
  Compiler c(b, root, options);
  return c.Compile(schema, path, 0);
}

Element JsonObjectElement(GrammarBuilder& b, const JsonSchemaOptions& options) {
  static const nlohmann::ordered_json kTrue = true;
  Compiler c(b, kTrue, options);
  const Element any = c.AnyValue();
  return c.Members(
      b.Seq({b.Byte('"'), b.Star(JsonCharElement(b, CodePointSet::All(), options.escaped)),
             b.Byte('"')},
            "key"),
      any, 0, -1);
}

}  // namespace dsinfer::structured
