#include "structured/json_schema_merge.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace dsinfer::structured {

namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> TypeList(const Json& s) {
  std::vector<std::string> out;
  if (!s.is_object() || !s.contains("type")) return out;
  if (s["type"].is_string()) out.push_back(s["type"].get<std::string>());
  if (s["type"].is_array()) {
    for (const auto& t : s["type"]) {
      if (t.is_string()) out.push_back(t.get<std::string>());
    }
  }
  return out;
}

// The values the schema allows when it lists them (const / enum), else null.
const Json* Values(const Json& s, Json* scratch) {
  if (!s.is_object()) return nullptr;
  if (s.contains("const")) {
    *scratch = Json::array({s["const"]});
    return scratch;
  }
  if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
  return nullptr;
}

bool TypesOverlap(const std::string& a, const std::string& b) {
  if (a == b) return true;
  return (a == "integer" && b == "number") || (a == "number" && b == "integer");
}

}  // namespace

bool JsonTypeMatches(const std::string& t, const Json& v) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

StatusOr<const Json*> ResolveRef(const Json& root, const std::string& ref,
                                 const std::string& path) {
  if (ref.empty() || ref[0] != '#') {
    return Unimplemented("$ref '" + ref + "' at " + path +
                         " is not a local reference (only '#...' refs are supported)");
  }
  if (ref.size() > 1 && ref[1] != '/')
    return Unimplemented("$ref '" + ref + "' at " + path + " uses an anchor");
  const Json* cur = &root;
  size_t i = 1;
  while (i < ref.size()) {
    const size_t j = ref.find('/', i + 1);
    std::string token = ref.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
    std::string un;
    for (size_t k = 0; k < token.size(); ++k) {  // ~1 -> /, ~0 -> ~, %25 style left alone
      if (token[k] == '~' && k + 1 < token.size() && (token[k + 1] == '0' || token[k + 1] == '1')) {
        un += token[k + 1] == '0' ? '~' : '/';
        ++k;
      } else {
        un += token[k];
      }
    }
    if (cur->is_object() && cur->contains(un)) {
      cur = &(*cur)[un];
    } else if (cur->is_array() && !un.empty() && un.size() <= 9 &&
               un.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(un) < cur->size()) {
      cur = &(*cur)[std::stoul(un)];
    } else {
      return InvalidArgument("$ref '" + ref + "' at " + path + " does not resolve");
    }
    if (j == std::string::npos) break;
    i = j;
  }
  return cur;
}

StatusOr<Json> Flatten(const Json& s, const Json& root, const std::string& path, int depth) {
  if (depth > 64) return InvalidArgument("$ref / allOf expansion deeper than 64 at " + path);
  if (!s.is_object()) return s;
  Json out = s;
  out.erase("$ref");
  out.erase("allOf");
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return InvalidArgument("$ref at " + path + " must be a string");
    DSINFER_ASSIGN_OR_RETURN(const Json* target,
                             ResolveRef(root, s["$ref"].get<std::string>(), path));
    DSINFER_ASSIGN_OR_RETURN(Json t,
                             Flatten(*target, root, s["$ref"].get<std::string>(), depth + 1));
    DSINFER_ASSIGN_OR_RETURN(out, MergeSchemas(std::move(out), t, root, path, depth + 1));
  }
  if (s.contains("allOf")) {
    if (!s["allOf"].is_array()) return InvalidArgument("allOf at " + path + " must be an array");
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      const std::string sub = path + "/allOf/" + std::to_string(i);
      DSINFER_ASSIGN_OR_RETURN(Json t, Flatten(s["allOf"][i], root, sub, depth + 1));
      DSINFER_ASSIGN_OR_RETURN(out, MergeSchemas(std::move(out), t, root, sub, depth + 1));
    }
  }
  return out;
}

StatusOr<Json> MergeSchemas(Json a, const Json& b, const Json& root, const std::string& path,
                            int depth) {
  if (b.is_boolean()) {
    if (b.get<bool>()) return a;
    return InvalidArgument("allOf at " + path + " includes false: nothing satisfies it");
  }
  if (a.is_boolean()) {
    if (!a.get<bool>())
      return InvalidArgument("allOf at " + path + " includes false: nothing satisfies it");
    a = Json::object();
  }
  if (!b.is_object())
    return InvalidArgument("the schema at " + path + " must be an object or a boolean");
  // additionalProperties only sees the properties of its own schema object: merging in another
  // branch's properties would change what it forbids.
  for (const auto& [x, y] : {std::pair<const Json*, const Json*>{&a, &b}, {&b, &a}}) {
    if (!x->contains("additionalProperties") || (*x)["additionalProperties"] == true ||
        !y->contains("properties") || !(*y)["properties"].is_object()) {
      continue;
    }
    for (const auto& [name, sub] : (*y)["properties"].items()) {
      if (!x->contains("properties") || !(*x)["properties"].is_object() ||
          !(*x)["properties"].contains(name)) {
        return Unimplemented(
            "allOf at " + path + " combines additionalProperties with property '" + name +
            "' of another subschema (unevaluatedProperties semantics are not supported)");
      }
    }
  }
  static const std::set<std::string> kMax = {"minimum", "exclusiveMinimum", "minLength", "minItems",
                                             "minProperties"};
  static const std::set<std::string> kMin = {"maximum", "exclusiveMaximum", "maxLength", "maxItems",
                                             "maxProperties"};
  for (const auto& [k, v] : b.items()) {
    if (!a.contains(k) || a[k] == v) {
      a[k] = v;
      continue;
    }
    Json& x = a[k];
    if (k == "title" || k == "description" || k == "default" || k == "examples" ||
        k == "$comment" || k == "$id" || k == "$schema" || k == "$defs" || k == "definitions") {
      continue;
    } else if (k == "properties" && x.is_object() && v.is_object()) {
      for (const auto& [name, sub] : v.items()) {
        if (x.contains(name)) {
          x[name] = Json{{"allOf", Json::array({x[name], sub})}};
        } else {
          x[name] = sub;
        }
      }
    } else if (k == "required" && x.is_array() && v.is_array()) {
      for (const auto& r : v) {
        if (std::find(x.begin(), x.end(), r) == x.end()) x.push_back(r);
      }
    } else if (k == "type") {
      const std::vector<std::string> ta = TypeList(a), tb = TypeList(b);
      Json both = Json::array();
      for (const auto& t : ta) {
        for (const auto& u : tb) {
          if (TypesOverlap(t, u)) both.push_back(t == "integer" || u == "integer" ? "integer" : t);
        }
      }
      if (both.empty())
        return InvalidArgument("allOf at " + path + " combines types that never overlap");
      x = both.size() == 1 ? both[0] : both;
    } else if ((kMax.count(k) || kMin.count(k)) && x.is_number() && v.is_number()) {
      const bool take_max = kMax.count(k) > 0;
      if ((v.get<double>() > x.get<double>()) == take_max) x = v;
    } else if (k == "enum" && x.is_array() && v.is_array()) {
      Json both = Json::array();
      for (const auto& e : x) {
        if (std::find(v.begin(), v.end(), e) != v.end()) both.push_back(e);
      }
      if (both.empty())
        return InvalidArgument("allOf at " + path + " has enums with no common value");
      x = both;
    } else if (k == "additionalProperties" || k == "items") {
      if (x == false || v == false) {
        x = false;
      } else {
        x = Json{{"allOf", Json::array({x, v})}};
      }
    } else {
      return Unimplemented("allOf combining two different values of '" + k + "' at " + path);
    }
  }
  (void)root;
  (void)depth;
  return a;
}

bool ProvablyDisjoint(const Json& a, const Json& b, const Json& root, int depth) {
  if (depth > 32 || !a.is_object() || !b.is_object()) return false;
  Json sa, sb;
  const Json* va = Values(a, &sa);
  const Json* vb = Values(b, &sb);
  if (va && vb) {
    for (const auto& x : *va) {
      if (std::find(vb->begin(), vb->end(), x) != vb->end()) return false;
    }
    return true;
  }
  const std::vector<std::string> ta = TypeList(a), tb = TypeList(b);
  if (!ta.empty() && !tb.empty()) {
    bool overlap = false;
    for (const auto& t : ta) {
      for (const auto& u : tb) overlap |= TypesOverlap(t, u);
    }
    if (!overlap) return true;
  }
  // A value list against a typed schema: disjoint when no listed value has one of its types.
  for (const auto& [vals, types] : {std::pair{va, tb}, std::pair{vb, ta}}) {
    if (!vals || types.empty()) continue;
    bool any = false;
    for (const auto& v : *vals) {
      for (const auto& t : types) any |= JsonTypeMatches(t, v);
    }
    if (!any) return true;
  }
  // Objects told apart by a property both require, with disjoint schemas.
  if (a.contains("properties") && b.contains("properties") && a.contains("required") &&
      b.contains("required") && a["properties"].is_object() && b["properties"].is_object() &&
      a["required"].is_array() && b["required"].is_array()) {
    for (const auto& r : a["required"]) {
      if (!r.is_string() ||
          std::find(b["required"].begin(), b["required"].end(), r) == b["required"].end())
        continue;
      const std::string name = r.get<std::string>();
      if (!a["properties"].contains(name) || !b["properties"].contains(name)) continue;
      auto fa = Flatten(a["properties"][name], root, "#", 0);
      auto fb = Flatten(b["properties"][name], root, "#", 0);
      if (fa.ok() && fb.ok() && ProvablyDisjoint(*fa, *fb, root, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace dsinfer::structured
