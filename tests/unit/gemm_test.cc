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

namespace dsinfer::backend::cpu {
namespace {

// The act_quant definition written out: the scale 2^ceil(log2(amax / 448)) by log2 (not by
// exponent bits), the e4m3 rounding of base/dtype (checked against the grid in dtype_test).
float ActQuantReference(const float* x, int64_t k, int64_t i) {
  const int64_t b = i / kActQuantBlock * kActQuantBlock, e = std::min<int64_t>(k, b + kActQuantBlock);
  float amax = 0;
  for (int64_t j = b; j < e; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float ratio = std::max(amax, 1e-4f) / 448.0f;
  const float s = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(static_cast<double>(ratio)))));
  return E4M3ToFloat(FloatToE4M3(x[i] / s)) * s;
}

TEST(ActQuantTest, MatchesTheSpecDefinition) {
  // Blocks of very different magnitudes, a partial last block, exact ties, subnormal e4m3 codes,
  // zeros and an all-tiny block (the 1e-4 amax floor).
  const int64_t k = 128 * 5 + 40;
  std::vector<float> x = testing::RandomVector(k, 7);
  for (int64_t i = 0; i < 128; ++i) x[i] *= 1e3f;
  for (int64_t i = 128; i < 256; ++i) x[i] *= 1e-3f;
  for (int64_t i = 256; i < 384; ++i) x[i] = 1e-7f * static_cast<float>(i % 5);
  for (int64_t i = 384; i < 512; ++i) x[i] = 0.01f * static_cast<float>(i % 7);
  x[400] = 0.0f;
  x[401] = -0.0f;
  x[402] = 1.0f;     // block amax 1.1875 -> s = 2^-8: x/s = 256 exactly
  x[403] = 1.0625f;  // 272: a tie between 256 and 288 (grid 32) -> 256 (even mantissa)
  x[404] = 1.1875f;  // 304: a tie between 288 and 320 -> 320 (even mantissa)
  x[405] = 0.00390625f * 0.013671875f;  // deep in the subnormal range after scaling
  std::vector<float> q(k);
  ActQuantRow(x.data(), k, q.data());
  for (int64_t i = 0; i < k; ++i) {
    const float want = ActQuantReference(x.data(), k, i);
    EXPECT_EQ(q[i], want) << "i=" << i << " x=" << x[i];
  }
  EXPECT_NE(q, x);  // it does quantize
}

TEST(ActQuantTest, GemmQuantizesTheInputOfQuantizedWeights) {
  const int m = 3, k = 300, n = 17;
  auto x = testing::RandomVector(m * k, 11), w = testing::RandomVector(n * k, 12);
  std::vector<float> xq(m * k), y(m * n), y_ref(m * n), y_plain(m * n);
  for (int i = 0; i < m; ++i) ActQuantRow(x.data() + i * k, k, xq.data() + i * k);
  WeightView wq(w.data());
  wq.act_quant = true;
  Gemm(x.data(), m, k, k, wq, n, y.data(), n, nullptr);
  Gemm(xq.data(), m, k, k, w.data(), n, y_ref.data(), n, nullptr);
  Gemm(x.data(), m, k, k, w.data(), n, y_plain.data(), n, nullptr);
  EXPECT_EQ(y, y_ref);
  EXPECT_NE(y, y_plain);
}

}  // namespace
}  // namespace dsinfer::backend::cpu
