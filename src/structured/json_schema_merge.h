// Schema algebra for the JSON Schema compiler: local $ref resolution (JSON pointers into the root
// document), allOf / $ref-with-siblings flattening into one schema, and the disjointness test
// that lets oneOf compile as a choice. Pure functions over nlohmann::ordered_json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace dsinfer::structured {

// The schema `ref` ("#", "#/$defs/x", "#/definitions/x", any local JSON pointer) points at.
StatusOr<const nlohmann::ordered_json*> ResolveRef(const nlohmann::ordered_json& root,
                                                   const std::string& ref, const std::string& path);
// `s` with its top-level $ref and allOf expanded and merged into one schema object.
StatusOr<nlohmann::ordered_json> Flatten(const nlohmann::ordered_json& s,
                                         const nlohmann::ordered_json& root,
                                         const std::string& path, int depth);
// One schema that holds exactly when both hold (Unimplemented when that is not expressible).
StatusOr<nlohmann::ordered_json> MergeSchemas(nlohmann::ordered_json a,
                                              const nlohmann::ordered_json& b,
                                              const nlohmann::ordered_json& root,
                                              const std::string& path, int depth);
// True only if no instance can satisfy both (false when unsure).
bool ProvablyDisjoint(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                      const nlohmann::ordered_json& root, int depth = 0);
// `v` is an instance of JSON Schema type `type`.
bool JsonTypeMatches(const std::string& type, const nlohmann::ordered_json& v);

}  // namespace dsinfer::structured
