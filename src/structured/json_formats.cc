#include "structured/json_formats.h"

namespace dsinfer::structured {

namespace {

// Days 01-28 in every month, 29-30 outside February, 31 in the long months.
constexpr const char* kDate =
    "[0-9]{4}-(((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8]))|((0[13-9]|1[0-2])-(29|30))|"
    "((0[13578]|1[02])-31))";
constexpr const char* kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
constexpr const char* kLabel = "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?";

}  // namespace

std::optional<std::string> FormatRegex(const std::string& format) {
  if (format == "date") return "^" + std::string(kDate) + "$";
  if (format == "time") return "^" + std::string(kTime) + "$";
  if (format == "date-time") return "^" + std::string(kDate) + "T" + kTime + "$";
  if (format == "email") {
    return "^[a-z0-9]([a-z0-9._+-]{0,30}[a-z0-9])?@" + std::string(kLabel) + "(\\." + kLabel +
           "){0,3}\\.[a-z]{2,6}$";
  }
  if (format == "hostname") return "^" + std::string(kLabel) + "(\\." + kLabel + "){0,4}$";
  if (format == "uuid") {
    return "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
  }
  if (format == "ipv4") {
    return "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|"
           "[1-9]?[0-9])$";
  }
  if (format == "ipv6") return "^([0-9a-f]{1,4}:){7}[0-9a-f]{1,4}$";
  if (format == "uri") {
    return "^(https?|ftp)://" + std::string(kLabel) + "(\\." + kLabel +
           "){0,4}(/[A-Za-z0-9._~-]{1,20}){0,6}(\\?[A-Za-z0-9._~=&-]{1,40})?$";
  }
  return std::nullopt;
}

}  // namespace dsinfer::structured
