#include "model/deepseek_v4/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dsinfer::model::deepseek_v4 {

std::vector<float> ComputeInvFreq(double base, int dim, const io::YarnParams& yarn) {
  const int half = dim / 2;
  std::vector<float> inv(half);
  // transformers: base ** (arange(0, dim, 2).float() / dim), an fp32 power; 1 / that in fp32.
  std::vector<float> pos_freq(half);
  for (int i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    pos_freq[i] = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(base)),
                                              static_cast<double>(expo)));
  }
  if (!yarn.enabled) {
    for (int i = 0; i < half; ++i) inv[i] = 1.0f / pos_freq[i];
    return inv;
  }
  const double factor = yarn.factor, orig = yarn.original_max_position_embeddings;
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
  };
  double low = correction_dim(yarn.beta_fast), high = correction_dim(yarn.beta_slow);
  if (yarn.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float extrapolation = 1.0f / pos_freq[i];
    const float interpolation = 1.0f / (static_cast<float>(factor) * pos_freq[i]);
    inv[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv;
}

RopeTables RopeTables::Build(const io::DeepseekV4Config& config) {
  RopeTables t;
  t.main = ComputeInvFreq(config.rope_theta, config.rope_head_dim, io::YarnParams{});
  t.compress = ComputeInvFreq(config.compress_rope_theta, config.rope_head_dim, config.compress_yarn);
  return t;
}

}  // namespace dsinfer::model::deepseek_v4
