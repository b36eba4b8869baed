#include "model/deepseek_v41/quant_sim.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/dtype.h"

namespace dsinfer::model::deepseek_v41 {

float Pow2CeilScale(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 23) & 0xFF);
  const int k = exponent - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return std::ldexp(1.0f, k);
}

float RoundE2m1(float v) {
  const float m = std::fabs(v);
  int code = 0;
  code += m > 0.25f;
  code += m >= 0.75f;
  code += m > 1.25f;
  code += m >= 1.75f;
  code += m > 2.5f;
  code += m >= 3.5f;
  code += m > 5.0f;
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  if (code == 0) return 0.0f;
  return std::signbit(v) ? -kValues[code] : kValues[code];
}

void Fp8BlockSim(float* x, int64_t n, int64_t block) {
  if (n % block != 0) return;
  constexpr float kMax = 448.0f;
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0.0f;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = Pow2CeilScale(std::max(amax, 1e-4f) * (1.0f / kMax));
    for (int64_t i = b; i < b + block; ++i) {
      const float q = std::clamp(x[i] / s, -kMax, kMax);
      x[i] = E4M3ToFloat(FloatToE4M3(q)) * s;
    }
  }
}

void Fp4BlockSim(float* x, int64_t n, int64_t block, bool e4m3_scales) {
  if (n % block != 0) return;
  constexpr float kMax = 6.0f;
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0.0f;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = e4m3_scales ? E4M3ToFloat(FloatToE4M3(std::max(amax, 6.0f * 0x1p-9f) / kMax))
                                : Pow2CeilScale(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / kMax));
    for (int64_t i = b; i < b + block; ++i) {
      x[i] = RoundE2m1(std::clamp(x[i] / s, -kMax, kMax)) * s;
    }
  }
}

}  // namespace dsinfer::model::deepseek_v41
