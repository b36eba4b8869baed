// Dialect tables: effort texts verbatim from the reference encoders (recipe-v4.md §3.5, §3.10).
#include "recipe/dialect.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dsinfer::recipe {

namespace {

constexpr std::string_view kEffortAbsoluteMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

constexpr std::string_view kEffortBeyondMax =
    "Reasoning Effort: Beyond maximum \xE2\x80\x94 exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple "
    "angles and are certain that no assumption remains unchecked and no error remains "
    "undiscovered.\n\n";

}  // namespace

StatusOr<Dialect> ParseDialect(std::string_view name) {
  if (name == "v4") return Dialect::kV4;
  if (name == "v4-0731" || name == "v4-flash-0731" || name == "0731") return Dialect::kV4Flash0731;
  if (name == "v4.1" || name == "v41") return Dialect::kV41;
  return InvalidArgument("unknown dialect '" + std::string(name) + "' (v4, v4-0731 or v4.1)");
}

const char* DialectName(Dialect d) {
  switch (d) {
    case Dialect::kV4: return "v4";
    case Dialect::kV4Flash0731: return "v4-0731";
    case Dialect::kV41: return "v4.1";
  }
  return "?";
}

Dialect DetectDialect(const std::string& model_dir, bool has_system_token) {
  if (has_system_token) return Dialect::kV41;
  std::ifstream in;
  if (!model_dir.empty()) in.open(std::filesystem::path(model_dir) / "config.json");
  if (in.is_open()) {
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find("0731") != std::string::npos) return Dialect::kV4Flash0731;
  }
  return Dialect::kV4;
}

DsmlNames DsmlNamesOf(Dialect d) {
  if (d == Dialect::kV41) return {" calls", " invoke", " parameter"};
  return {"tool_calls", "invoke", "parameter"};
}

StatusOr<std::string> ReasoningEffortPrefix(Dialect d, std::string_view effort) {
  switch (d) {
    case Dialect::kV4:
      if (effort.empty() || effort == "high") return std::string();
      if (effort == "max") return std::string(kEffortAbsoluteMax);
      return InvalidArgument("reasoning effort '" + std::string(effort) +
                             "' is not one of high, max (dialect v4)");
    case Dialect::kV4Flash0731:
      if (effort.empty() || effort == "low") return std::string();
      if (effort == "high") return std::string(kEffortAbsoluteMax);
      if (effort == "max") return std::string(kEffortBeyondMax);
      return InvalidArgument("reasoning effort '" + std::string(effort) +
                             "' is not one of low, high, max (dialect v4-0731)");
    case Dialect::kV41: {
      int budget = 0;
      if (effort.empty() || effort == "high") {
        budget = 50;
      } else if (effort == "low") {
        budget = 25;
      } else if (effort == "xhigh") {
        budget = 75;
      } else if (effort == "max") {
        budget = 100;
      } else {
        const std::string e(effort);
        if (e.find_first_not_of("0123456789") == std::string::npos && e.size() <= 3) budget = std::stoi(e);
        if (budget < 1 || budget > 100) {
          return InvalidArgument("reasoning effort '" + e +
                                 "' is not low, high, xhigh, max or 1-100 (dialect v4.1)");
        }
      }
      return "Reasoning Effort: " + std::to_string(budget) +
             " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
    }
  }
  return std::string();
}

}  // namespace dsinfer::recipe
