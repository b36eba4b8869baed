#include "base/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dsinfer {
namespace {

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(Bf16ToFloat(0xc040), -3.0f);
}

TEST(DTypeTest, F16HandComputed) {
  EXPECT_EQ(F16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(F16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToF16(0.5f), 0x3800);
  for (uint32_t v = 0; v < 0x7c00; v += 7) EXPECT_EQ(FloatToF16(F16ToFloat(v)), v);
}

TEST(DTypeTest, E4M3HandComputed) {
  EXPECT_EQ(E4M3ToFloat(0x38), 1.0f);          // exp 7, mant 0
  EXPECT_EQ(E4M3ToFloat(0x7e), 448.0f);        // max finite
  EXPECT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // min subnormal
  EXPECT_EQ(E4M3ToFloat(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0x7f)));
  EXPECT_EQ(FloatToE4M3(1000.0f), 0x7e);        // saturates
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);        // 1 + 1/16: tie between 1 and 1.125 -> even (1)
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3a);        // tie between 1.125 and 1.25 -> even (1.25)
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;
    EXPECT_EQ(FloatToE4M3(E4M3ToFloat(v)), v == 0x80 ? 0x80 : v) << v;
  }
}

TEST(DTypeTest, E8M0AndE2M1) {
  EXPECT_EQ(E8M0ToFloat(127), 1.0f);
  EXPECT_EQ(E8M0ToFloat(120), 1.0f / 128);
  EXPECT_EQ(E8M0ToFloat(130), 8.0f);
  EXPECT_TRUE(std::isnan(E8M0ToFloat(255)));
  const float table[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(E2M1ToFloat(c), table[c]);
  EXPECT_EQ(FloatToE2M1(2.5f), 4);   // tie 2|3 -> even code (2.0 = code 4)
  EXPECT_EQ(FloatToE2M1(5.0f), 6);   // tie 4|6 -> code 6 (4.0)
  EXPECT_EQ(FloatToE2M1(7.0f), 7);   // saturates to 6
  EXPECT_EQ(FloatToE2M1(-0.7f), 9);  // -0.5
}

TEST(DTypeTest, Names) {
  EXPECT_EQ(DTypeFromName("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(DTypeFromName("BF16"), DType::kBF16);
  EXPECT_FALSE(DTypeFromName("F4").has_value());
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
}

// FloatToE2M1 is branch-free; this is the plain definition it must equal: the nearest grid value,
// ties to the even code, saturating at 6, NaN to 0.
uint8_t E2M1Reference(float f) {
  static constexpr float kGrid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::isnan(f) ? 0.0f : std::fabs(f);
  if (a >= 6.0f) return sign | 7;
  for (uint8_t i = 0; i < 7; ++i) {
    const float mid = 0.5f * (kGrid[i] + kGrid[i + 1]);
    if (a < mid) return sign | i;
    if (a == mid) return sign | ((i % 2 == 0) ? i : static_cast<uint8_t>(i + 1));
  }
  return sign | 7;
}

// Probes for a rounding onto a grid: every float of [0, top] at 1/per_unit spacing (per_unit
// chosen so the grid values and midpoints are on it), one ulp either side of each, both signs,
// and the specials.
std::vector<float> GridProbes(int top, int per_unit) {
  std::vector<float> xs = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::nanf(""), 1e-30f, 1e30f};
  for (int i = 0; i <= top * per_unit; ++i) {
    const float v = static_cast<float>(i) / static_cast<float>(per_unit);
    for (float w : {v, std::nextafter(v, 0.0f), std::nextafter(v, 2.0f * top)}) {
      xs.push_back(w);
      xs.push_back(-w);
    }
  }
  return xs;
}

TEST(DTypeTest, E2M1MatchesTheGridDefinition) {
  for (float x : GridProbes(8, 8192)) ASSERT_EQ(FloatToE2M1(x), E2M1Reference(x)) << x;
}

// The e4m3fn grid by definition: the nearest of its finite values, ties to the even code,
// saturation at 448, NaN -> 0x7f.
uint8_t E4M3Reference(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::min(std::fabs(static_cast<double>(x)), 448.0);
  static const std::vector<double> grid = [] {  // codes 0x00..0x7e in increasing order
    std::vector<double> g;
    for (int c = 0; c <= 0x7e; ++c) g.push_back(E4M3ToFloat(static_cast<uint8_t>(c)));
    return g;
  }();
  const auto hi = std::lower_bound(grid.begin(), grid.end(), a);
  if (hi == grid.begin()) return sign;
  const int h = static_cast<int>(hi - grid.begin()), l = h - 1;
  if (hi == grid.end()) return sign | 0x7e;
  const double dl = a - grid[l], dh = grid[h] - a;
  const int c = dl < dh ? l : dh < dl ? h : (l % 2 == 0 ? l : h);
  return sign | static_cast<uint8_t>(c);
}

TEST(DTypeTest, E4M3MatchesTheGridDefinition) {
  // Spacing 2^-11: below the subnormal midpoints' 2^-10.
  for (float x : GridProbes(512, 2048)) ASSERT_EQ(FloatToE4M3(x), E4M3Reference(x)) << x;
}

}  // namespace
}  // namespace dsinfer
