// CUDA ops against the CPU backend: the linear kernel in every weight format over many shapes
// (0/1/odd row counts, k not a multiple of the vector width, grouped inputs), its batch invariance,
// and GPU sampling.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/sample.cuh"
#include "base/dtype.h"
#include "io/quant.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

// Every decode-GEMV format on (by default only f32/bf16 take it), so that the bit-identity checks
// below cover all of its instantiations against LinearBody.
const bool kAllGemvFormats = setenv("DSINFER_GEMV", "f32,bf16,fp8,fp4", 0) == 0;

#define SKIP_WITHOUT_GPU() \
  if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device"

struct HostWeight {
  WeightFormat format;
  std::vector<uint8_t> data, scale;
  std::vector<float> dequant;  // [n, k] reference values
};

HostWeight MakeWeight(WeightFormat f, int64_t n, int64_t k, uint32_t seed) {
  HostWeight h;
  h.format = f;
  auto w = testing::RandomVector(static_cast<size_t>(n * k), seed, 0.2f);
  switch (f) {
    case WeightFormat::kF32:
      h.data.resize(w.size() * 4);
      std::memcpy(h.data.data(), w.data(), h.data.size());
      h.dequant = w;
      break;
    case WeightFormat::kBf16:
      h.data.resize(w.size() * 2);
      h.dequant.resize(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        const uint16_t b = FloatToBf16(w[i]);
        std::memcpy(h.data.data() + 2 * i, &b, 2);
        h.dequant[i] = Bf16ToFloat(b);
      }
      break;
    case WeightFormat::kFp8: {
      auto q = io::QuantizeFp8Blocks(w, n, k, 128);
      h.data = q.data;
      h.scale = q.scale;
      h.dequant.resize(w.size());
      const int64_t sk = (k + 127) / 128;
      for (int64_t i = 0; i < n * k; ++i) {
        h.dequant[i] = E4M3ToFloat(q.data[i]) * E8M0ToFloat(q.scale[(i / k / 128) * sk + (i % k) / 128]);
      }
      break;
    }
    case WeightFormat::kFp4: {
      auto q = io::QuantizeFp4(w, n, k);
      h.data = q.data;
      h.scale = q.scale;
      h.dequant.resize(w.size());
      for (int64_t i = 0; i < n * k; ++i) {
        const uint8_t byte = q.data[i / 2];
        h.dequant[i] = E2M1ToFloat(i % 2 == 0 ? (byte & 0xf) : (byte >> 4)) * E8M0ToFloat(q.scale[i / 32]);
      }
      break;
    }
  }
  return h;
}

struct Case {
  WeightFormat format;
  int64_t m, n, k;
};

// A linear over weight `hw` (uploaded to wd / sd) and x rows xd [m, k]; y is left to the caller.
LinearParams DenseParams(const Case& cs, const HostWeight& hw, const DeviceBuffer& wd,
                         const DeviceBuffer& sd, const DeviceBuffer& xd) {
  LinearParams p;
  p.w.format = cs.format;
  p.w.data = wd.get();
  p.w.scale = sd.get();
  p.w.scale_format = hw.scale.empty() ? ScaleFormat::kNone : ScaleFormat::kUe8m0;
  p.w.n = cs.n;
  p.w.k = cs.k;
  p.x = xd.as<float>();
  p.ldx = cs.k;
  p.m = cs.m;
  p.ldy = cs.n;
  return p;
}

class LinearTest : public ::testing::TestWithParam<Case> {};

TEST_P(LinearTest, MatchesCpu) {
  SKIP_WITHOUT_GPU();
  const Case cs = GetParam();
  HostWeight hw = MakeWeight(cs.format, cs.n, cs.k, 7);
  auto x = testing::RandomVector(static_cast<size_t>(std::max<int64_t>(cs.m, 1) * cs.k), 11);
  std::vector<float> ref(static_cast<size_t>(cs.m * cs.n));
  cpu::Linear(x.data(), cs.m, cs.k, hw.dequant.data(), cs.n, ref.data(), nullptr);

  DeviceBuffer wd(hw.data.size()), sd(std::max<size_t>(hw.scale.size(), 1)), xd(x.size() * 4),
      yd(std::max<size_t>(ref.size(), 1) * 4);
  CopyToDeviceSync(wd.get(), hw.data.data(), hw.data.size());
  if (!hw.scale.empty()) CopyToDeviceSync(sd.get(), hw.scale.data(), hw.scale.size());
  CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
  Stream s;
  Memset(yd.get(), 0xff, yd.bytes(), s.get());  // poison: every output must be written
  LinearParams p = DenseParams(cs, hw, wd, sd, xd);
  p.y = yd.as<float>();
  LaunchLinear(p, s.get());
  std::vector<float> got(ref.size());
  CopyToHost(got.data(), yd.get(), got.size() * 4, s.get());
  s.Synchronize();
  if (cs.m == 0) return;
  EXPECT_LE(testing::RelativeError(got, ref), 1e-5) << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k;

  // Batch invariance: each row alone gives bit-identical results.
  for (int64_t r : {int64_t{0}, cs.m - 1}) {
    LinearParams one = p;
    one.x = xd.as<float>() + r * cs.k;
    one.m = 1;
    one.y = yd.as<float>();
    LaunchLinear(one, s.get());
    std::vector<float> row(static_cast<size_t>(cs.n));
    CopyToHost(row.data(), yd.get(), row.size() * 4, s.get());
    s.Synchronize();
    int64_t first = -1;
    for (int64_t i = 0; i < cs.n && first < 0; ++i) {
      if (std::memcmp(&row[i], &got[r * cs.n + i], 4) != 0) first = i;
    }
    EXPECT_EQ(first, -1) << "row " << r << ": alone " << (first >= 0 ? row[first] : 0.0f) << " batched "
                         << (first >= 0 ? got[r * cs.n + first] : 0.0f) << " cpu "
                         << (first >= 0 ? ref[r * cs.n + first] : 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Values(Case{WeightFormat::kF32, 1, 33, 96}, Case{WeightFormat::kF32, 0, 8, 64},
                      Case{WeightFormat::kF32, 5, 17, 42},   // k % 4 != 0: scalar path
                      Case{WeightFormat::kF32, 300, 24, 16384},
                      Case{WeightFormat::kBf16, 1, 129, 4096}, Case{WeightFormat::kBf16, 7, 64, 100},
                      Case{WeightFormat::kFp8, 1, 1024, 4096}, Case{WeightFormat::kFp8, 3, 200, 1024},
                      Case{WeightFormat::kFp8, 129, 130, 520},  // k not a multiple of 128
                      Case{WeightFormat::kFp8, 2, 48, 40},      // scalar path
                      Case{WeightFormat::kFp4, 1, 2048, 4096}, Case{WeightFormat::kFp4, 6, 96, 2048},
                      Case{WeightFormat::kFp4, 64, 33, 96},
                      // Every decode-GEMV configuration (gemv.cuh): m <= 4 runs it, m >= 5 runs
                      // LinearBody, and the batch-invariance check compares single rows (GEMV)
                      // with the batched rows bit for bit.
                      Case{WeightFormat::kFp8, 6, 70, 4096},     // 8 accumulators, 8 chunks
                      Case{WeightFormat::kFp8, 5, 33, 8192},     // 16 chunks per lane
                      Case{WeightFormat::kFp8, 5, 200, 2048},    // 4 accumulators
                      Case{WeightFormat::kFp8, 5, 130, 3072},    // 4 accumulators, 6 chunks
                      Case{WeightFormat::kFp8, 4, 70, 4096},     // GEMV over 4 rows
                      Case{WeightFormat::kBf16, 5, 129, 4096}, Case{WeightFormat::kBf16, 5, 65, 1536},
                      Case{WeightFormat::kF32, 5, 20, 16384},    // several passes (m = 1 only)
                      Case{WeightFormat::kFp4, 5, 96, 4096}, Case{WeightFormat::kFp4, 5, 40, 3072}));

TEST(LinearTest, GroupedInput) {
  SKIP_WITHOUT_GPU();
  // wo_a: 3 groups of 20 output rows, each reading its own 32 input columns.
  const int64_t G = 3, R = 20, C = 32, m = 5;
  auto w = testing::RandomVector(G * R * C, 3);
  auto x = testing::RandomVector(m * G * C, 4);
  std::vector<float> ref(m * G * R);
  for (int64_t g = 0; g < G; ++g) {
    cpu::Gemm(x.data() + g * C, m, C, G * C, w.data() + g * R * C, R, ref.data() + g * R, G * R, nullptr);
  }
  DeviceBuffer wd(w.size() * 4), xd(x.size() * 4), yd(ref.size() * 4);
  CopyToDeviceSync(wd.get(), w.data(), w.size() * 4);
  CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
  Stream s;
  LinearParams p;
  p.w.format = WeightFormat::kF32;
  p.w.data = wd.get();
  p.w.n = G * R;
  p.w.k = C;
  p.x = xd.as<float>();
  p.ldx = G * C;
  p.m = m;
  p.x_group_rows = R;
  p.x_group_stride = C;
  p.y = yd.as<float>();
  p.ldy = G * R;
  LaunchLinear(p, s.get());
  std::vector<float> got(ref.size());
  CopyToHost(got.data(), yd.get(), got.size() * 4, s.get());
  s.Synchronize();
  EXPECT_LE(testing::RelativeError(got, ref), 1e-5);
}

// The fused SwiGLU linear (one GEMV over W1 and W3) gives the same bits as W1, W3 and LaunchSwiglu.
TEST(LinearTest, FusedSwigluMatchesUnfused) {
  SKIP_WITHOUT_GPU();
  for (const Case cs : {Case{WeightFormat::kFp8, 1, 300, 4096}, Case{WeightFormat::kFp8, 3, 300, 4096},
                        Case{WeightFormat::kFp4, 1, 200, 4096}, Case{WeightFormat::kFp4, 2, 96, 2048},
                        Case{WeightFormat::kBf16, 1, 64, 1024}}) {
    HostWeight h1 = MakeWeight(cs.format, cs.n, cs.k, 21), h3 = MakeWeight(cs.format, cs.n, cs.k, 22);
    auto x = testing::RandomVector(static_cast<size_t>(cs.m * cs.k), 23);
    DeviceBuffer w1(h1.data.size()), s1(std::max<size_t>(h1.scale.size(), 1)), w3(h3.data.size()),
        s3(std::max<size_t>(h3.scale.size(), 1)), xd(x.size() * 4), g(cs.m * cs.n * 4),
        u(cs.m * cs.n * 4), ref(cs.m * cs.n * 4);
    CopyToDeviceSync(w1.get(), h1.data.data(), h1.data.size());
    CopyToDeviceSync(w3.get(), h3.data.data(), h3.data.size());
    if (!h1.scale.empty()) {
      CopyToDeviceSync(s1.get(), h1.scale.data(), h1.scale.size());
      CopyToDeviceSync(s3.get(), h3.scale.data(), h3.scale.size());
    }
    CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
    Stream s;
    LinearParams p = DenseParams(cs, h1, w1, s1, xd);
    WeightRef w3ref = p.w;
    w3ref.data = w3.get();
    w3ref.scale = s3.get();
    const float limit = 0.7f;  // small enough that the clamp matters
    // Reference: one row at a time through the unfused path.
    for (int64_t r = 0; r < cs.m; ++r) {
      LinearParams a = p;
      a.x = xd.as<float>() + r * cs.k;
      a.m = 1;
      a.y = ref.as<float>() + r * cs.n;
      LaunchLinear(a, s.get());
      LinearParams b = a;
      b.w = w3ref;
      b.y = u.as<float>() + r * cs.n;
      LaunchLinear(b, s.get());
    }
    LaunchSwiglu(ref.as<float>(), u.as<float>(), cs.m, cs.n, cs.n, limit, s.get());
    Memset(g.get(), 0xff, g.bytes(), s.get());
    p.y = g.as<float>();
    LaunchLinearSwiglu(p, w3ref, u.as<float>(), limit, s.get());
    std::vector<float> got(cs.m * cs.n), want(cs.m * cs.n);
    CopyToHost(got.data(), g.get(), got.size() * 4, s.get());
    CopyToHost(want.data(), ref.get(), want.size() * 4, s.get());
    s.Synchronize();
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
        << "format " << static_cast<int>(cs.format) << " m=" << cs.m << " n=" << cs.n;
  }
}

TEST(SampleTest, GreedyAndSeededGumbel) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 3, V = 5000;
  auto lg = testing::RandomVector(rows * V, 9);
  lg[1 * V + 4321] = 100.0f;
  DeviceBuffer ld(lg.size() * 4), od(rows * 4), od2(rows * 4);
  CopyToDeviceSync(ld.get(), lg.data(), lg.size() * 4);
  Stream s;
  SampleParams p;
  p.logits = ld.as<float>();
  p.rows = rows;
  p.vocab = V;
  p.out = od.as<int32_t>();
  LaunchSample(p, s.get());
  std::vector<int32_t> got(rows);
  CopyToHost(got.data(), od.get(), rows * 4, s.get());
  s.Synchronize();
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[r], std::max_element(lg.begin() + r * V, lg.begin() + (r + 1) * V) - (lg.begin() + r * V));
  }
  p.temperature = 1.0f;
  p.seed = 42;
  LaunchSample(p, s.get());
  p.out = od2.as<int32_t>();
  LaunchSample(p, s.get());
  std::vector<int32_t> a(rows), b(rows);
  CopyToHost(a.data(), od.get(), rows * 4, s.get());
  CopyToHost(b.data(), od2.get(), rows * 4, s.get());
  s.Synchronize();
  EXPECT_EQ(a, b);           // same key, same token
  EXPECT_EQ(a[1], 4321);     // a dominant logit wins at temperature 1
}

}  // namespace
}  // namespace dsinfer::backend::cuda
