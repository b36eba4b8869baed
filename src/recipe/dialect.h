// Dialect: which DeepSeek-V4 prompt format a checkpoint speaks (recipe-v4.md §0.3, §3.5, §3.10):
//   kV4        V4 / V4-Flash preview (Apr 2026): effort "high" (no text) or "max";
//   kV4Flash0731  V4-Flash-0731 GA: effort low (default, no text) / high / max, new texts;
//   kV41       V4.1: <｜System｜>, numeric effort 1-100, DSML tags with a leading space.
// Plus the fixed strings each dialect uses. Pure data; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace dsinfer::recipe {

enum class Dialect { kV4, kV4Flash0731, kV41 };

// "v4" | "v4-0731" | "v4.1" (also "v4-flash-0731", "v41").
StatusOr<Dialect> ParseDialect(std::string_view name);
const char* DialectName(Dialect d);

// Picks the dialect of a model dir: V4.1 if its tokenizer has <｜System｜>, V4-Flash-0731 if its
// config.json mentions 0731, else V4. `has_system_token` comes from the tokenizer.
Dialect DetectDialect(const std::string& model_dir, bool has_system_token);

// Control-token spellings (U+FF5C '｜', U+2581 '▁').
inline constexpr std::string_view kBos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
inline constexpr std::string_view kEos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
inline constexpr std::string_view kUser = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
inline constexpr std::string_view kAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";
inline constexpr std::string_view kSystem = "<\xEF\xBD\x9CSystem\xEF\xBD\x9C>";
inline constexpr std::string_view kLatestReminder = "<\xEF\xBD\x9Clatest_reminder\xEF\xBD\x9C>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";

// The DSML tag names of a dialect: "tool_calls"/"invoke"/"parameter" or " calls"/" invoke"/
// " parameter" (V4.1).
struct DsmlNames {
  std::string_view calls;
  std::string_view invoke;
  std::string_view parameter;
};
DsmlNames DsmlNamesOf(Dialect d);

// The reasoning-effort prefix for `effort` ("" = the dialect's default) in thinking mode, or an
// InvalidArgument for an effort the dialect does not know.
StatusOr<std::string> ReasoningEffortPrefix(Dialect d, std::string_view effort);

}  // namespace dsinfer::recipe
