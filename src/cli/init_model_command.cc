// `dsinfer init-model`: writes a model dir with deterministic random weights for a preset or a
// DeepSeek-V4 / V4.1 config.json (--config: any shape, e.g. for a benchmark or a numerics
// study), or converts a model dir to another weight format (--from: e.g. the official FP8 / FP4
// copy of a BF16 model for the GPU).
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/pipeline_io.h"
#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "io/model_family.h"
#include "model/deepseek_v4/init_presets.h"
#include "model/deepseek_v41/init_presets.h"

namespace dsinfer::cli {

namespace {

const std::vector<FlagSpec> kSpecs = {
    {"preset",
     "tiny (tests) or mid / flash-l8 (benchmarks); v41-tiny, v41-tiny-engram, v41-tiny-dspark: "
     "DeepSeek-V4.1 (f32 "
     "or bf16 weights)"},
    {"config",
     "instead of --preset: a DeepSeek-V4 or V4.1 config.json whose shapes the random weights take "
     "(the model dir gets this config)"},
    {"from", "instead of --preset: convert this model dir's weights to --weights"},
    {"out", "output model dir"},
    {"seed", "random seed (default 0)"},
    {"weights", "f32 | bf16 (default) | fp8 | official (FP8 + FP4 experts) | official-bf16"},
};

Status Run(const Flags& flags) {
  using namespace model::deepseek_v4;
  const int sources = flags.Has("preset") + flags.Has("config") + flags.Has("from");
  if (sources != 1 || !flags.Has("out")) {
    return InvalidArgument("--out and exactly one of --preset, --config and --from are required");
  }
  DSINFER_ASSIGN_OR_RETURN(auto format, ParseWeightFormat(flags.GetOr("weights", "bf16")));
  if (auto from = flags.Get("from")) return ConvertModel(*from, *flags.Get("out"), format);
  DSINFER_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 0));
  if (auto path = flags.Get("config")) {
    DSINFER_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(*path));
    const std::string out = *flags.Get("out");
    const auto write = [&](const auto& config) -> Status {
      using model::deepseek_v4::WriteRandomModel;  // the config's family picks the writer
      using model::deepseek_v41::WriteRandomModel;
      if (!config.ok()) return InvalidArgument(*path + ": " + config.status().message());
      return WriteRandomModel(*config, out, static_cast<uint64_t>(seed), format);
    };
    if (io::ModelFamilyOfConfigJson(text) == io::ModelFamily::kDeepseekV41)
      return write(io::ParseDeepseekV41Config(text));
    return write(io::ParseDeepseekV4Config(text));
  }
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
      "Writes a model dir with deterministic random weights (a preset or a config.json), or "
      "converts one (--from).",
      kSpecs, Run);
}

}  // namespace dsinfer::cli
