#include "request/json_text.h"

#include <string>

#include "tokenizer/utf8.h"

namespace dsinfer::request {

namespace {

// Deepest [ / { nesting outside strings (the text need not be valid JSON).
int MaxDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

StatusOr<nlohmann::json> ParseJsonText(std::string_view text) {
  const size_t bad = tokenizer::FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return InvalidArgument("invalid UTF-8 at byte offset " + std::to_string(bad));
  }
  if (MaxDepth(text) > kMaxJsonDepth) {
    return InvalidArgument("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() names the line, column and what was read there.
    return InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace dsinfer::request
