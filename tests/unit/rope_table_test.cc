#include "model/deepseek_v4/rope_table.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dsinfer::model::deepseek_v4 {
namespace {

// V4-Flash compress table (spec §2.4): base 160000, YaRN factor 16, orig 65536, β 32/1.
TEST(RopeTableTest, FlashCompressTableMatchesSpec) {
  io::YarnParams yarn{true, 16.0, 65536.0, 32.0, 1.0, true};
  auto inv = ComputeInvFreq(160000.0, 64, yarn);
  ASSERT_EQ(inv.size(), 32u);
  // i <= 15 unchanged, i >= 25 divided by 16.
  for (int i : {0, 5, 15}) EXPECT_NEAR(inv[i], std::pow(160000.0, -2.0 * i / 64), 1e-6 * inv[i]);
  for (int i : {25, 31}) EXPECT_NEAR(inv[i], std::pow(160000.0, -2.0 * i / 64) / 16, 1e-6 * inv[i]);
  EXPECT_NEAR(inv[16], 2.265625e-3, 2e-8);
  EXPECT_NEAR(inv[31], 5.680529e-7, 1e-12);
  auto plain = ComputeInvFreq(10000.0, 64, io::YarnParams{});
  EXPECT_NEAR(plain[1], std::pow(10000.0, -2.0 / 64), 1e-7);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
