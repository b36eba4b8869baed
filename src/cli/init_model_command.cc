// `dsinfer init-model`: writes a model dir with deterministic random weights for a preset, or
// converts a model dir to another weight format (--from: e.g. the official FP8 / FP4 copy of a
// BF16 model for the GPU).
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/deepseek_v4/init_presets.h"
#include "model/deepseek_v41/init_presets.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"preset",
     "tiny (tests) or mid / flash-l8 (benchmarks); v41-tiny, v41-tiny-engram, v41-tiny-dspark: "
     "DeepSeek-V4.1 (f32 "
     "or bf16 weights)"},
    {"from", "instead of --preset: convert this model dir's weights to --weights"},
    {"out", "output model dir"},
    {"seed", "random seed (default 0)"},
    {"weights", "f32 | bf16 (default) | fp8 | official (FP8 + FP4 experts) | official-bf16"},
};

Status Run(const Flags& flags) {
  using namespace model::deepseek_v4;
  if (flags.Has("preset") == flags.Has("from") || !flags.Has("out")) {
    return InvalidArgument("--out and exactly one of --preset and --from are required");
  }
  DSINFER_ASSIGN_OR_RETURN(auto format, ParseWeightFormat(flags.GetOr("weights", "bf16")));
  if (auto from = flags.Get("from")) return ConvertModel(*from, *flags.Get("out"), format);
  DSINFER_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 0));
  const std::string preset = *flags.Get("preset");
  const auto v41 = model::deepseek_v41::PresetNames();
  if (std::find(v41.begin(), v41.end(), preset) != v41.end()) {
    DSINFER_ASSIGN_OR_RETURN(auto config, model::deepseek_v41::PresetConfig(preset));
    return model::deepseek_v41::WriteRandomModel(config, *flags.Get("out"),
                                                 static_cast<uint64_t>(seed), format);
  }
  const auto v4 = PresetNames();
  if (std::find(v4.begin(), v4.end(), preset) == v4.end()) {
    std::string names;
    for (const auto& n : v4) names += n + ", ";
    for (const auto& n : v41) names += n + (n == v41.back() ? "" : ", ");
    return InvalidArgument("unknown preset '" + preset + "' (" + names + ")");
  }
  DSINFER_ASSIGN_OR_RETURN(auto config, PresetConfig(preset));
  return WriteRandomModel(config, *flags.Get("out"), static_cast<uint64_t>(seed), format);
}

}  // namespace

int RunInitModel(int argc, char** argv) {
  return RunSubcommand(
      argc, argv, "init-model",
      "Writes a model dir with deterministic random weights, or converts one (--from).", kSpecs,
      Run);
}

}  // namespace dsinfer::cli
