// `dsinfer init-model`: writes a model dir with deterministic random weights for a preset, or
// converts a model dir to another weight format (--from: e.g. the official FP8 / FP4 copy of a
// BF16 model for the GPU).
#include <cstdio>

#include "cli/commands.h"
#include "cli/flags.h"
#include "model/deepseek_v4/init_presets.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"preset", "tiny (tests) or mid / flash-l8 (benchmarks)"},
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
  DSINFER_ASSIGN_OR_RETURN(auto config, PresetConfig(*flags.Get("preset")));
  DSINFER_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 0));
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
