#include "backend/cpu/gemm.h"
#include "base/dtype.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace dsinfer::backend::cpu {
namespace {

TEST(GemmTest, MatchesDoublePrecision) {
  ThreadPool pool(3);
  for (auto [m, k, n] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {5, 7, 3}, {9, 64, 10}, {33, 130, 65}}) {
    auto x = testing::RandomVector(m * k, 1), w = testing::RandomVector(n * k, 2);
    std::vector<float> y(m * n);
    Gemm(x.data(), m, k, k, w.data(), n, y.data(), n, &pool);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int t = 0; t < k; ++t) ref += double(x[i * k + t]) * w[j * k + t];
        EXPECT_NEAR(y[i * n + j], ref, 1e-4 * (1 + std::abs(ref))) << m << " " << k << " " << n;
      }
    }
  }
}

// Batch invariance: a row's result is bit-identical whatever the other rows, the row count, the
// thread count or the output stride.
TEST(GemmTest, BatchInvariant) {
  const int k = 200, n = 37;
  auto w = testing::RandomVector(n * k, 5);
  auto x = testing::RandomVector(13 * k, 6);
  std::vector<float> single(n);
  Gemm(x.data() + 7 * k, 1, k, k, w.data(), n, single.data(), n, nullptr);
  ThreadPool pool(4);
  for (int m : {8, 13}) {
    std::vector<float> y(m * (n + 3));
    Gemm(x.data(), m, k, k, w.data(), n, y.data(), n + 3, &pool);
    for (int j = 0; j < n; ++j) EXPECT_EQ(y[7 * (n + 3) + j], single[j]) << m << " " << j;
  }
  EXPECT_EQ(Dot(x.data() + 7 * k, w.data() + 4 * k, k), single[4]);
}

}  // namespace
}  // namespace dsinfer::backend::cpu

namespace dsinfer::backend::cpu {
namespace {

// bf16 weights give bit-identical results to the same values held as fp32.
TEST(GemmTest, Bf16WeightsEqualTheirFp32Values) {
  const int m = 7, k = 133, n = 41;
  auto x = testing::RandomVector(m * k, 11);
  auto wf = testing::RandomVector(n * k, 12);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = FloatToBf16(wf[i]);
    wf[i] = Bf16ToFloat(wb[i]);
  }
  ThreadPool pool(3);
  std::vector<float> yf(m * n), yb(m * n);
  Gemm(x.data(), m, k, k, wf.data(), n, yf.data(), n, &pool);
  Gemm(x.data(), m, k, k, WeightView::Bf16(wb.data()), n, yb.data(), n, &pool);
  EXPECT_EQ(yf, yb);
  std::vector<float> row(n);
  Gemm(x.data() + 3 * k, 1, k, k, WeightView::Bf16(wb.data()).Offset(5, k), n - 5, row.data(), n - 5, nullptr);
  for (int j = 0; j < n - 5; ++j) EXPECT_EQ(row[j], yf[3 * n + 5 + j]);
}

}  // namespace
}  // namespace dsinfer::backend::cpu
