// The two RoPE frequency tables of spec §2.4: "main" (rope_theta, no scaling) for window-only layers
// and the MTP layer, "compress" (compress_rope_theta with YaRN, no magnitude scaling) for CSA/HCA
// layers, their compressors and the indexer. inv_freq is computed as transformers does, in fp32.
#pragma once

#include <vector>

#include "io/model_config.h"

namespace dsinfer::model::deepseek_v4 {

struct RopeTables {
  std::vector<float> main;      // [rope_head_dim / 2]
  std::vector<float> compress;  // [rope_head_dim / 2]

  static RopeTables Build(const io::DeepseekV4Config& config);
  const std::vector<float>& ForRate(int compress_rate) const {
    return compress_rate == 0 ? main : compress;
  }
};

// inv_freq[i] = base^(-2i/dim) with optional YaRN blending (exposed for tests).
std::vector<float> ComputeInvFreq(double base, int dim, const io::YarnParams& yarn);

}  // namespace dsinfer::model::deepseek_v4
