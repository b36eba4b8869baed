#include "cli/flags.h"

#include <cstdio>
#include <stdexcept>

namespace dsinfer::cli {

StatusOr<Flags> Flags::Parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
  Flags flags;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      flags.help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) return InvalidArgument("unexpected argument '" + arg + "'");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (!spec) return InvalidArgument("unknown flag --" + name + " (see --help)");
    if (spec->takes_value && !has_value) {
      if (i + 1 >= argc) return InvalidArgument("flag --" + name + " needs a value");
      value = argv[++i];
    } else if (!spec->takes_value && has_value) {
      return InvalidArgument("flag --" + name + " takes no value");
    }
    flags.values_[name] = value;
  }
  return flags;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Flags::GetOr(const std::string& name, const std::string& fallback) const {
  auto v = Get(name);
  return v ? *v : fallback;
}

StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    int64_t x = std::stoll(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing");
    return x;
  } catch (const std::exception&) {
    return InvalidArgument("flag --" + name + " needs an integer, got '" + *v + "'");
  }
}

int RunSubcommand(int argc, char** argv, const std::string& command, const std::string& summary,
                  const std::vector<FlagSpec>& specs, const std::function<Status(const Flags&)>& run) {
  auto flags = Flags::Parse(argc, argv, 2, specs);
  if (!flags.ok()) {
    std::fprintf(stderr, "dsinfer %s: %s\n", command.c_str(), flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::printf("%s", Usage(command, summary, specs).c_str());
    return 0;
  }
  Status st = run(*flags);
  if (!st.ok()) {
    std::fprintf(stderr, "dsinfer %s: %s\n", command.c_str(), st.ToString().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}

std::string Usage(const std::string& command, const std::string& summary,
                  const std::vector<FlagSpec>& specs) {
  std::string s = "Usage: dsinfer " + command + " [flags]\n" + summary + "\n\nFlags:\n";
  for (const auto& f : specs) {
    std::string left = "  --" + f.name + (f.takes_value ? " VALUE" : "");
    if (left.size() < 28) left.append(28 - left.size(), ' ');
    s += left + " " + f.help + "\n";
  }
  s +=
      "\nBad input gets one line on stderr naming the problem and a non-zero exit: 2 for a usage\n"
      "error (a flag or request value), 1 for a data error (a model dir, config.json or file that\n"
      "cannot be used; text that is not valid UTF-8 is refused with its byte offset).\n";
  return s;
}

}  // namespace dsinfer::cli
