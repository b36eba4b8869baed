#include "backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dsinfer::backend::cpu {
namespace {

TEST(OpsTest, RmsNorm) {
  std::vector<float> x = {3, 4};
  std::vector<float> w = {2, 1};
  RmsNorm(x.data(), 1, 2, w.data(), 0.0f);
  const float r = 1 / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(x[0], 2 * 3 * r);
  EXPECT_FLOAT_EQ(x[1], 4 * r);
}

TEST(OpsTest, RopeRotatesPairsAndInverts) {
  std::vector<float> x = {1, 0, 0, 1};
  const float inv_freq[2] = {0.5f, 0.25f};
  auto y = x;
  Rope(y.data(), 2, inv_freq, 2, false);  // angles 1.0 and 0.5
  EXPECT_NEAR(y[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(y[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(y[2], -std::sin(0.5), 1e-6);
  EXPECT_NEAR(y[3], std::cos(0.5), 1e-6);
  Rope(y.data(), 2, inv_freq, 2, true);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i], 1e-6);
}

TEST(OpsTest, SoftmaxAndActivations) {
  std::vector<float> x = {1, 2, -INFINITY};
  Softmax(x.data(), 3);
  EXPECT_NEAR(x[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_FLOAT_EQ(Softplus(30.0f), 30.0f);
  EXPECT_NEAR(Softplus(0.0f), std::log(2.0), 1e-6);
  EXPECT_NEAR(Silu(1.0f), 1 / (1 + std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace dsinfer::backend::cpu
