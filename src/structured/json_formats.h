// The JSON Schema `format`s that constrain generation, as regexes over the string's value
// (RegexMode::kJsonPattern, anchored): date, time, date-time, email, uuid, ipv4, ipv6, uri,
// hostname. Each generates a subset of the format (e.g. no February 29, lower-case hex, full-form
// IPv6, bounded label lengths) so every output is valid under strict checkers. Pure function.
#pragma once

#include <optional>
#include <string>

namespace dsinfer::structured {

// The regex of `format`, or nullopt if the format is not supported.
std::optional<std::string> FormatRegex(const std::string& format);

}  // namespace dsinfer::structured
