// Flags: a small command-line parser for the dsinfer subcommands. Accepts `--name value`,
// `--name=value` and boolean `--name`; unknown flags are an error, so typos never pass silently.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsinfer::cli {

struct FlagSpec {
  std::string name;       // without the leading "--"
  std::string help;
  bool takes_value = true;
};

class Flags {
 public:
  // Parses argv[first..argc). --help is always accepted.
  static StatusOr<Flags> Parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  bool help() const { return help_; }

 private:
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

// The common shell of a subcommand: parses flags (exit 2 on bad usage), prints --help, runs `run`
// and maps its Status to one "dsinfer <command>: <error>" line on stderr and the exit code
// (0 ok, 2 invalid argument, 1 anything else).
int RunSubcommand(int argc, char** argv, const std::string& command, const std::string& summary,
                  const std::vector<FlagSpec>& specs, const std::function<Status(const Flags&)>& run);

// "Usage: dsinfer <command> [flags]" plus one line per flag.
std::string Usage(const std::string& command, const std::string& summary,
                  const std::vector<FlagSpec>& specs);

}  // namespace dsinfer::cli
