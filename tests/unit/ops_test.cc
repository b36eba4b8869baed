#include "backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/attention.h"
#include "base/dtype.h"

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

// AttendHeadBf16 is its definition: q rounded to bf16; per chunk of 32 keys in list order the
// weights e_j = exp(z_j - the chunk's max), summed unrounded, rounded to bf16 for the chunk's P V;
// o = sum_c exp(m_c - M) P V_c / (sum_c exp(m_c - M) sum_c + exp(sink - M)). Checked against that
// formula in double (the roundings taken from float values as the function computes them) for
// key counts around the chunk size, and against the fp32 attention (AttendHead), which it must
// not equal: the roundings are there.
TEST(AttendHeadBf16Test, IsTheChunkedBf16Definition) {
  const int d = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n : {0, 1, 31, 32, 33, 100}) {
    std::vector<float> q(d), rows(static_cast<size_t>(n) * d);
    for (float& v : q) v = nd(rng);
    for (float& v : rows) v = RoundToBf16(nd(rng));  // the cache's bf16 values
    std::vector<const float*> keys;
    for (int j = 0; j < n; ++j) keys.push_back(rows.data() + static_cast<size_t>(j) * d);
    const float scale = 0.125f, sink = 0.3f;
    std::vector<float> o(d), o32(d), logits(static_cast<size_t>(n) + 1);
    AttendHeadBf16(q.data(), keys, d, scale, sink, o.data());
    AttendHead(q.data(), keys, d, scale, sink, logits.data(), o32.data());
    // The definition in double.
    std::vector<double> qb(d), num(d, 0.0);
    for (int i = 0; i < d; ++i) qb[i] = RoundToBf16(q[i]);
    std::vector<double> z(n), mc, sums;
    std::vector<std::vector<double>> pv;
    for (int c0 = 0; c0 < n; c0 += 32) {
      const int len = std::min(32, n - c0);
      double m = -INFINITY, sum = 0;
      for (int j = c0; j < c0 + len; ++j) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += qb[i] * keys[j][i];
        z[j] = static_cast<float>(dot) * scale;
        m = std::max(m, z[j]);
      }
      std::vector<double> part(d, 0.0);
      for (int j = c0; j < c0 + len; ++j) {
        const float e = std::exp(static_cast<float>(z[j] - m));
        sum += e;
        for (int i = 0; i < d; ++i) part[i] += static_cast<double>(RoundToBf16(e)) * keys[j][i];
      }
      mc.push_back(m);
      sums.push_back(sum);
      pv.push_back(part);
    }
    double M = sink;
    for (double m : mc) M = std::max(M, m);
    double den = std::exp(sink - M);
    for (size_t c = 0; c < mc.size(); ++c) {
      den += std::exp(mc[c] - M) * sums[c];
      for (int i = 0; i < d; ++i) num[i] += std::exp(mc[c] - M) * pv[c][i];
    }
    double err = 0, diff32 = 0, amax = 0;
    for (int i = 0; i < d; ++i) {
      err = std::max(err, std::fabs(o[i] - num[i] / den));
      diff32 = std::max(diff32, std::fabs(static_cast<double>(o[i]) - o32[i]));
      amax = std::max(amax, std::fabs(num[i] / den));
    }
    EXPECT_LE(err, 1e-5 * std::max(amax, 1e-30)) << n << " keys";
    if (n == 0) {
      for (float v : o) EXPECT_EQ(v, 0.0f);
    } else {
      EXPECT_GT(amax, 1e-2) << n << " keys";
      EXPECT_GT(diff32, 1e-4 * amax) << n << " keys: no rounding";
    }
  }
}

}  // namespace
}  // namespace dsinfer::backend::cpu
