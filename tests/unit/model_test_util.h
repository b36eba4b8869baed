// A small DeepSeek-V4 config with every layer type for model tests, and a cached model dir.
#pragma once

#include <filesystem>
#include <string>

#include "model/deepseek_v4/init_presets.h"
#include "test_util.h"

namespace dsinfer::testing {

// The tiny preset with a 300-token vocabulary: SWA, CSA (rate 4, top-k 8), HCA (rate 16), hash and
// top-k MoE, MTP. Windows of 16 so that short sequences exercise every state transition.
inline io::DeepseekV4Config SmallConfig() {
  auto c = *model::deepseek_v4::PresetConfig("tiny");
  c.vocab_size = 300;
  return c;
}

// n token ids below SmallConfig().vocab_size, a pure function of the seed.
inline std::vector<int32_t> RandomIds(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % SmallConfig().vocab_size);
  return ids;
}

inline std::string SmallModelDir(model::deepseek_v4::WeightFormat format, const std::string& name,
                                 uint64_t seed = 7) {
  const std::string dir = ScratchDir("model_" + name);
  auto st = model::deepseek_v4::WriteRandomModel(SmallConfig(), dir, seed, format);
  if (!st.ok()) throw std::runtime_error(st.ToString());
  return dir;
}

}  // namespace dsinfer::testing
