// DeepSeek-V4.1 model presets with deterministic random weights, written as a model dir
// (config.json in the composite `text_config` form + model.safetensors with the official tensor
// names, F32 or BF16), for tests and `dsinfer init-model --preset v41-tiny`. Each tensor's values
// depend only on (seed, tensor name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/init_presets.h"

namespace dsinfer::model::deepseek_v41 {

std::vector<std::string> PresetNames();
// "v41-tiny": 8 layers with the release's structure shrunk — 2 window-only layers, a ratio-2
// encoder of two KV groups (sources 2 and 4), a ratio-1 decoder group (source 6, the candidate
// source) with a Reindex layer (7); two-level top-k with blocks of 2; window 8; hc 4; the
// DeepSeek vocabulary (129,280 ids, so the V4 tokenizer files work with it) and a 4,096-token
// context.
// "v41-tiny-engram": v41-tiny with the Engram memory at layers 1 and 5 (4-grams over 2 hash heads,
// 32 channels per row, tables of ~6,000 rows: primes above 1,000), its compressed token map a
// stand-in (id mod 64,640), and the DSpark drafter of v41-tiny-dspark.
// "v41-tiny-dspark": v41-tiny with a DSpark drafter of 3 stages (blocks of 5, taps of layers 5-7,
// a rank-16 Markov head, 4 experts top-2).
StatusOr<io::DeepseekV41Config> PresetConfig(const std::string& name);

// Writes <dir>/config.json and <dir>/model.safetensors (and, with Engram, engram_token_map.json).
// Formats: kF32 (every tensor F32) or kBf16 (matrices and norms BF16; mHC, sinks and router biases
// F32, as the release); the others are refused (Unimplemented).
Status WriteRandomModel(const io::DeepseekV41Config& config, const std::string& dir, uint64_t seed,
                        deepseek_v4::WeightFormat format = deepseek_v4::WeightFormat::kF32);

}  // namespace dsinfer::model::deepseek_v41
