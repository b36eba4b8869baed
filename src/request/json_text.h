// ParseJsonText: the one way a request body or a JSONL line becomes JSON. Bytes that are not
// UTF-8 are refused with the offset of the first bad byte (not a vague "not valid JSON"),
// nesting deeper than kMaxJsonDepth is refused before parsing (so no recursion in a parser,
// printer or renderer can exhaust the stack), and a syntax error names its line and column.
// Pure function; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace dsinfer::request {

inline constexpr int kMaxJsonDepth = 64;

// InvalidArgument for invalid UTF-8, too deep nesting or a syntax error.
StatusOr<nlohmann::json> ParseJsonText(std::string_view text);

}  // namespace dsinfer::request
