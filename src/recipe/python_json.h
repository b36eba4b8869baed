// PythonJsonDumps: JSON text byte-identical to Python's json.dumps(value, ensure_ascii=False), which
// the reference encoder uses for tool schemas, response formats and non-string tool arguments
// (recipe-v4.md §3.6): separators ", " and ": ", key order kept, non-ASCII raw, escapes \" \\ \n
// \r \t \b \f and \u00XX for other control characters, floats as Python repr (1.0, 1e+20, 1e-05).
// Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dsinfer::recipe {

std::string PythonJsonDumps(const nlohmann::ordered_json& value);

// A JSON string literal of `s` in the same style ("\"a\\nb\"").
std::string PythonJsonString(const std::string& s);

}  // namespace dsinfer::recipe
