// Model presets with deterministic random weights, written as a real model dir (config.json +
// model.safetensors with the official tensor names), for tests, the embedded default model and
// benchmarks. Each tensor's values depend only on (seed, tensor name), never on write order.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace dsinfer::model::deepseek_v4 {

enum class WeightFormat {
  kF32,           // every tensor fp32
  kBf16,          // matrices and norms bf16; mHC, sinks, ape, router bias fp32 (as the release)
  kFp8,           // as kBf16 but every quantizable linear FP8 e4m3 with 128x128 ue8m0 scales
  kOfficial,      // the release format: FP8 dense linears, FP4 e2m1 routed experts (spec §4.3)
  kOfficialBf16,  // the kOfficial values dequantized and stored as BF16 (lossless)
};

StatusOr<WeightFormat> ParseWeightFormat(const std::string& name);
std::vector<std::string> PresetNames();
StatusOr<io::DeepseekV4Config> PresetConfig(const std::string& name);

// Writes <dir>/config.json and <dir>/model.safetensors.
Status WriteRandomModel(const io::DeepseekV4Config& config, const std::string& dir, uint64_t seed,
                        WeightFormat format);
// Writes the model in `from_dir` (any stored format, dequantized to float) to `dir` in `format`,
// e.g. the official FP8 / FP4 copy of a BF16 model for the GPU (config.json follows).
Status ConvertModel(const std::string& from_dir, const std::string& dir, WeightFormat format);

}  // namespace dsinfer::model::deepseek_v4
