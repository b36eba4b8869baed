// The two RoPE tables of DeepSeek-V4.1 (the same scheme as V4, spec §2.4): "main" (rope_theta, no
// scaling) for ratio-0 layers, "compress" (compress_rope_theta + YaRN, no magnitude scaling) for
// layers with a compressed branch, their compressed entries, index keys and indexer queries.
// Interleaved pairs on the trailing rope_head_dim channels.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/ops.h"
#include "io/deepseek_v41_config.h"

namespace dsinfer::model::deepseek_v41 {

struct RopeTables {
  std::vector<float> main;      // [rope_head_dim / 2]
  std::vector<float> compress;  // [rope_head_dim / 2]
  static RopeTables Build(const io::DeepseekV41Config& config);
  const std::vector<float>& ForRatio(int ratio) const { return ratio == 0 ? main : compress; }
};

using backend::cpu::RopeRows;

}  // namespace dsinfer::model::deepseek_v41
