// The CUDA linear kernels against the CPU backend, in every weight format over many shapes (0/1/odd
// row counts, k not a multiple of the vector width or the act_quant block, grouped inputs, routed
// experts): FP8/FP4 with the activation quantization of spec §2.12 (bit-exact against the CPU's),
// the tiled and the bf16 tensor-core forms, batch invariance (every tile and row count the same
// bits). gpu_step_ops_test.cc has the model step's other ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>

#include "backend/cpu/gemm.h"
#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "io/quant.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

struct HostWeight {
  WeightFormat format;
  std::vector<uint8_t> data, scale;  // as uploaded (FP8/FP4: TileFp8ForMma / TileFp4ForMma and
                                     // TileFp4ScalesForMma order)
  std::vector<float> dequant;  // [n, k] reference values
  bool quantized() const { return format == WeightFormat::kFp8 || format == WeightFormat::kFp4; }
  // The CPU reference: the dequantized weight, its input act_quant'ed when FP8/FP4.
  cpu::WeightView view() const {
    cpu::WeightView v(dequant.data());
    v.act_quant = quantized();
    return v;
  }
};

// spread: each 128 x 128 block scaled by its own power of two (2^-3 .. 2^3), so that block scales
// differ and a wrong scale index shows.
HostWeight MakeWeight(WeightFormat f, int64_t n, int64_t k, uint32_t seed, bool spread = false) {
  HostWeight h;
  h.format = f;
  auto w = testing::RandomVector(static_cast<size_t>(n * k), seed, 0.2f);
  if (spread) {
    for (int64_t i = 0; i < n * k; ++i)
      w[i] = std::ldexp(w[i], static_cast<int>((3 * (i / k / 128) + 5 * (i % k / 128)) % 7) - 3);
  }
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
      h.data.resize(static_cast<size_t>(Fp8TiledBytes(n, k)));
      TileFp8ForMma(q.data.data(), h.data.data(), n, k);
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
      h.data.resize(q.data.size());
      TileFp4ForMma(q.data.data(), h.data.data(), n, k);
      h.scale.resize(q.scale.size());
      TileFp4ScalesForMma(q.scale.data(), h.scale.data(), n, k);
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
  cpu::Linear(x.data(), cs.m, cs.k, hw.view(), cs.n, ref.data(), nullptr);

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
                      Case{WeightFormat::kBf16, 5, 129, 4096}, Case{WeightFormat::kBf16, 5, 65, 1536},
                      Case{WeightFormat::kF32, 5, 20, 16384},    // several GEMV passes (m = 1 only)
                      // FP8/FP4 (tensor cores): one and several warps' k slices, k not a multiple
                      // of the 128-column act_quant block, row counts that are not tile multiples,
                      // token tiles of 8 and 16 (quantized in the kernel: no scratch given here).
                      Case{WeightFormat::kFp8, 1, 1024, 4096}, Case{WeightFormat::kFp8, 3, 200, 1024},
                      Case{WeightFormat::kFp8, 129, 130, 576}, Case{WeightFormat::kFp8, 2, 48, 64},
                      Case{WeightFormat::kFp8, 13, 70, 8192}, Case{WeightFormat::kFp8, 0, 16, 128},
                      Case{WeightFormat::kFp4, 1, 2048, 4096}, Case{WeightFormat::kFp4, 6, 96, 2048},
                      Case{WeightFormat::kFp4, 64, 48, 192}, Case{WeightFormat::kFp4, 11, 32, 3072}));

// act_quant on the GPU gives exactly the CPU's values (ActQuantRow), partial last block included.
TEST(ActQuantTest, MatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 7, k = 128 * 9 + 64, ldq = (k + 15) / 16 * 16, lds = (k + 127) / 128;
  auto x = testing::RandomVector(static_cast<size_t>(rows * k), 31);
  for (int64_t i = 0; i < k; ++i) x[i] *= 1e-6f;  // row 0 below the 1e-4 amax floor
  for (int64_t i = 0; i < 128; ++i) x[k + i] *= 1e4f;
  DeviceBuffer xd(x.size() * 4), qd(rows * ldq * 2), sd(rows * lds * 4);
  CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
  Stream s;
  ActQuantParams p;
  p.x = xd.as<float>(); p.ldx = k; p.rows = rows; p.k = k;
  p.q = qd.as<uint16_t>(); p.ldq = ldq; p.s = sd.as<float>(); p.lds = lds;
  LaunchActQuant(p, s.get());
  std::vector<uint16_t> q(rows * ldq);  // the e4m3 values as f16
  std::vector<float> sc(rows * lds);
  CopyToHost(q.data(), qd.get(), q.size() * 2, s.get());
  CopyToHost(sc.data(), sd.get(), sc.size() * 4, s.get());
  s.Synchronize();
  std::vector<float> want(k);
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    cpu::ActQuantRow(x.data() + r * k, k, want.data());
    for (int64_t i = 0; i < k; ++i) {
      const float got = F16ToFloat(q[r * ldq + i]) * sc[r * lds + i / 128];
      if (std::memcmp(&got, &want[i], 4) != 0 && bad++ < 5) {
        ADD_FAILURE() << "row " << r << " col " << i << ": gpu " << got << " cpu " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// The staged orders of the warpgroup-MMA GEMM (QOrder): within each 64-column pair, column c sits
// where the decode kernel's lane t = c / 16 (FP8; FP4: per 32-column group, t = c % 32 / 8) gives
// it as word w (FP8: c % 16 / 2; FP4: c % 8 / 2) -> k16 step w / 2 (FP4: + 2 * group), B register
// w % 2: position step * 16 + register * 8 + 2t + c % 2. The pre-pass writing them and the restage
// of natural rows give exactly that permutation of the natural values, with the same scales.
TEST(ActQuantTest, StagedOrdersPermuteEachPair) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 5, k = 64 * 7, ldq = k, lds = (k + 127) / 128;
  auto x = testing::RandomVector(static_cast<size_t>(rows * k), 57);
  DeviceBuffer xd = Upload(x), nat(rows * ldq * 2), sn(rows * lds * 4), stg(rows * ldq * 2),
               ss(rows * lds * 4), rst(rows * ldq * 2);
  Stream s;
  auto quantize = [&](QOrder order, DeviceBuffer& q, DeviceBuffer& sc) {
    ActQuantParams p;
    p.x = xd.as<float>();
    p.ldx = k;
    p.rows = rows;
    p.k = k;
    p.q = q.as<uint16_t>();
    p.ldq = ldq;
    p.s = sc.as<float>();
    p.lds = lds;
    p.order = order;
    LaunchActQuant(p, s.get());
  };
  quantize(QOrder::kNatural, nat, sn);
  std::vector<uint16_t> natural(rows * ldq), staged(rows * ldq), restaged(rows * ldq);
  std::vector<float> scn(rows * lds), scs(rows * lds);
  CopyToHost(natural.data(), nat.get(), natural.size() * 2, s.get());
  CopyToHost(scn.data(), sn.get(), scn.size() * 4, s.get());
  for (const bool fp4 : {false, true}) {
    const QOrder order = fp4 ? QOrder::kWgFp4 : QOrder::kWgFp8;
    quantize(order, stg, ss);
    LaunchQRestage(nat.as<uint16_t>(), rst.as<uint16_t>(), rows, k, ldq, order, s.get());
    CopyToHost(staged.data(), stg.get(), staged.size() * 2, s.get());
    CopyToHost(restaged.data(), rst.get(), restaged.size() * 2, s.get());
    CopyToHost(scs.data(), ss.get(), scs.size() * 4, s.get());
    s.Synchronize();
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        const int64_t cp = c % 64, base = r * ldq + c - cp;
        const int64_t t = fp4 ? cp % 32 / 8 : cp / 16, w = fp4 ? cp % 8 / 2 : cp % 16 / 2;
        const int64_t step = w / 2 + (fp4 ? 2 * (cp / 32) : 0);
        const int64_t pos = step * 16 + (w % 2) * 8 + 2 * t + c % 2;
        bad += staged[base + pos] != natural[r * ldq + c];
        bad += restaged[base + pos] != natural[r * ldq + c];
      }
    }
    EXPECT_EQ(bad, 0) << (fp4 ? "FP4" : "FP8") << " order";
    EXPECT_EQ(std::memcmp(scs.data(), scn.data(), scn.size() * 4), 0);
  }
}

// Many rows: the act_quant pre-pass into scratch and token tiles of 32 give the same bits as the
// in-kernel quantization (no scratch) and as rows quantized by the caller, and match the CPU.
TEST(LinearTest, PrepassEqualsInKernelQuantization) {
  SKIP_WITHOUT_GPU();
  for (const Case cs : {Case{WeightFormat::kFp8, 300, 144, 4096}, Case{WeightFormat::kFp4, 77, 64, 2048}}) {
    HostWeight hw = MakeWeight(cs.format, cs.n, cs.k, 41);
    auto x = testing::RandomVector(static_cast<size_t>(cs.m * cs.k), 42);
    std::vector<float> ref(static_cast<size_t>(cs.m * cs.n));
    cpu::Linear(x.data(), cs.m, cs.k, hw.view(), cs.n, ref.data(), nullptr);
    DeviceBuffer wd(hw.data.size()), sd(hw.scale.size()), xd(x.size() * 4), y1(ref.size() * 4),
        y2(ref.size() * 4), aq(cs.m * cs.k * 2), as(cs.m * cs.k / 128 * 4);
    CopyToDeviceSync(wd.get(), hw.data.data(), hw.data.size());
    CopyToDeviceSync(sd.get(), hw.scale.data(), hw.scale.size());
    CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
    Stream s;
    LinearParams p = DenseParams(cs, hw, wd, sd, xd);
    p.y = y1.as<float>();
    LaunchLinear(p, s.get());
    p.y = y2.as<float>();
    p.aq.q = aq.as<uint8_t>(); p.aq.q_bytes = static_cast<int64_t>(aq.bytes());
    p.aq.s = as.as<float>(); p.aq.s_count = static_cast<int64_t>(as.bytes() / 4);
    LaunchLinear(p, s.get());
    std::vector<float> a(ref.size()), b(ref.size()), c(ref.size()), d1(cs.n), d2(cs.n);
    CopyToHost(a.data(), y1.get(), a.size() * 4, s.get());
    CopyToHost(b.data(), y2.get(), b.size() * 4, s.get());
    // Rows quantized by the caller (LaunchActQuantRows): all rows, and the last row alone (the
    // decode launch shape).
    DeviceBuffer qb(cs.m * QuantizedLd(cs.k) * 2), sq(cs.m * QuantizedScales(cs.k) * 4);
    LinearParams g = DenseParams(cs, hw, wd, sd, xd);
    g.xq = LaunchActQuantRows(xd.as<float>(), cs.k, cs.m, cs.k, qb.as<uint16_t>(), sq.as<float>(),
                              s.get());
    g.x = nullptr;
    g.y = y1.as<float>();
    LaunchLinear(g, s.get());
    CopyToHost(c.data(), y1.get(), c.size() * 4, s.get());
    g.m = 1;
    g.xq.q += (cs.m - 1) * g.xq.ldq;
    g.xq.s += (cs.m - 1) * g.xq.lds;
    LaunchLinear(g, s.get());
    CopyToHost(d1.data(), y1.get(), d1.size() * 4, s.get());
    s.Synchronize();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "format " << static_cast<int>(cs.format);
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * 4))
        << "format " << static_cast<int>(cs.format);
    std::copy_n(a.begin() + (cs.m - 1) * cs.n, cs.n, d2.begin());
    EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * 4))
        << "format " << static_cast<int>(cs.format);
    EXPECT_LE(testing::RelativeError(b, ref), 1e-5);
  }
}

TEST(LinearTest, GroupedInput) {
  SKIP_WITHOUT_GPU();
  // wo_a: G groups of R output rows, each reading its own C input columns (fp32 and FP8 weights).
  // FP8 with few rows (quantized in the kernel) and many (the pre-pass and 32-row tiles); 3 x 1024
  // rows: wo_a-like groups of many row tiles.
  for (const Case cs :
       {Case{WeightFormat::kF32, 5, 20, 32}, Case{WeightFormat::kFp8, 5, 32, 256},
        Case{WeightFormat::kFp8, 40, 48, 384}, Case{WeightFormat::kFp8, 40, 1024, 256}}) {
    const int64_t G = 3, R = cs.n, C = cs.k, m = cs.m;
    HostWeight hw = MakeWeight(cs.format, G * R, C, 3);
    auto x = testing::RandomVector(m * G * C, 4);
    std::vector<float> ref(m * G * R);
    for (int64_t g = 0; g < G; ++g) {
      cpu::Gemm(x.data() + g * C, m, C, G * C, hw.view().Offset(g * R, C), R, ref.data() + g * R, G * R, nullptr);
    }
    DeviceBuffer wd(hw.data.size()), sd(std::max<size_t>(hw.scale.size(), 1)), xd(x.size() * 4),
        yd(ref.size() * 4), aq(m * G * C * 2), as(m * G * C);
    CopyToDeviceSync(wd.get(), hw.data.data(), hw.data.size());
    if (!hw.scale.empty()) CopyToDeviceSync(sd.get(), hw.scale.data(), hw.scale.size());
    CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
    Stream s;
    LinearParams p = DenseParams(Case{cs.format, m, G * R, C}, hw, wd, sd, xd);
    p.ldx = G * C;
    p.x_group_rows = R;
    p.x_group_stride = C;
    p.y = yd.as<float>();
    p.ldy = G * R;
    p.aq.q = aq.as<uint8_t>(); p.aq.q_bytes = static_cast<int64_t>(aq.bytes());  // used when m > 16
    p.aq.s = as.as<float>(); p.aq.s_count = static_cast<int64_t>(as.bytes() / 4);
    LaunchLinear(p, s.get());
    std::vector<float> got(ref.size());
    CopyToHost(got.data(), yd.get(), got.size() * 4, s.get());
    s.Synchronize();
    EXPECT_LE(testing::RelativeError(got, ref), 1e-5) << "format " << static_cast<int>(cs.format) << " m=" << m;
    // Batch invariance: the last row alone gives the same bits.
    LinearParams one = p;
    one.x = xd.as<float>() + (m - 1) * G * C;
    one.m = 1;
    LaunchLinear(one, s.get());
    std::vector<float> row(G * R);
    CopyToHost(row.data(), yd.get(), row.size() * 4, s.get());
    s.Synchronize();
    EXPECT_EQ(0, std::memcmp(row.data(), got.data() + (m - 1) * G * R, row.size() * 4))
        << "format " << static_cast<int>(cs.format) << " m=" << m << " n=" << R;
  }
}

// Routed experts of a test on the device: E experts' W1 (weights e) and W3 (E + e) of one shape
// with their pointer tables, and a routing of P pairs (by_expert[e]: expert e's pairs, ascending)
// as the route kernel leaves it: active slots in expert order, their pair-list offsets, the pair
// list; the slot arrays padded to P entries. Params(): the expert linear over x, W1's tables.
struct TestExperts {
  std::vector<HostWeight> hw;
  std::vector<DeviceBuffer> wd, sd;
  DeviceBuffer w1t, s1t, w3t, s3t, act, off, prs, na;
  Case cs;
  int P;
  TestExperts(const Case& shape, const std::vector<std::vector<int32_t>>& by_expert, int pairs,
              uint32_t seed)
      : cs(shape), P(pairs) {
    const int E = static_cast<int>(by_expert.size());
    std::vector<const void*> wp[2], sp[2];
    for (int e = 0; e < 2 * E; ++e) {
      hw.push_back(MakeWeight(cs.format, cs.n, cs.k, seed + e));
      wd.push_back(Upload(hw.back().data));
      sd.push_back(Upload(hw.back().scale));
      wp[e / E].push_back(wd.back().get());
      sp[e / E].push_back(sd.back().get());
    }
    w1t = Upload(wp[0]);
    s1t = Upload(sp[0]);
    w3t = Upload(wp[1]);
    s3t = Upload(sp[1]);
    std::vector<int32_t> active, offsets{0}, pair_list;
    for (int e = 0; e < E; ++e) {
      if (by_expert[e].empty()) continue;
      active.push_back(e);
      pair_list.insert(pair_list.end(), by_expert[e].begin(), by_expert[e].end());
      offsets.push_back(static_cast<int32_t>(pair_list.size()));
    }
    const int32_t nact = static_cast<int32_t>(active.size());
    active.resize(P, 0);
    offsets.resize(P + 1, offsets.back());
    act = Upload(active);
    off = Upload(offsets);
    prs = Upload(pair_list);
    na = Upload(std::vector<int32_t>{nact});
  }
  ExpertLinearParams Params(const DeviceBuffer& x, int x_row_div, float* y) const {
    ExpertLinearParams p;
    p.shape.format = cs.format;
    p.shape.scale_format = ScaleFormat::kUe8m0;
    p.shape.n = cs.n;
    p.shape.k = cs.k;
    p.data = w1t.as<const void*>();
    p.scale = s1t.as<const void*>();
    p.x = x.as<float>();
    p.ldx = cs.k;
    p.x_row_div = x_row_div;
    p.ldy = cs.n;
    p.active = act.as<int32_t>();
    p.num_active = na.as<int32_t>();
    p.offsets = off.as<int32_t>();
    p.pairs = prs.as<int32_t>();
    p.max_slots = P;
    p.total_pairs = P;
    p.y = y;
    return p;
  }
  // The launch of p: the fused SwiGLU pair (W3 from the tables) or W1 alone.
  void Launch(const ExpertLinearParams& p, bool dual, DeviceBuffer& u, StreamHandle st) const {
    if (dual)
      LaunchExpertLinearSwiglu(p, w3t.as<const void*>(), s3t.as<const void*>(), u.as<float>(), 0.7f,
                               st);
    else
      LaunchExpertLinear(p, st);
  }
};

// Routed experts (FP8 and FP4, one matrix and the fused SwiGLU pair): the grouped launch (pairs
// routed to 5 experts, read through the pair list) gives the bits of each expert as a dense linear
// over 13 rows or more, the same with its rows quantized by the caller (FP4 there: the row-tile
// kernel where KernelOptions::qexpert_rows_min_slots lets it run; checked), and matches the CPU;
// the second routing gives expert 0 five tokens, the third 21 (three token tiles).
TEST(LinearTest, ExpertsMatchDenseBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const int T : {3, 5, 21})
    for (const Case cs :
         {Case{WeightFormat::kFp4, 0, 512, 4096}, Case{WeightFormat::kFp4, 0, 96, 2048},
          Case{WeightFormat::kFp8, 0, 200, 1024}, Case{WeightFormat::kFp8, 0, 64, 4096}}) {
      for (const bool dual : {false, true}) {
        const std::string name = "format " + std::to_string(static_cast<int>(cs.format)) +
                                 " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k) +
                                 (dual ? " swiglu" : "") + " tokens " + std::to_string(T);
        const int E = 5, K = 2, P = T * K;
        // T = 3: token i routes to experts i % E and (i + 2) % E (pair i * K + j); T = 5: to expert
        // 0 and 1 + i % 4. Slots in expert order.
        std::vector<std::vector<int32_t>> by_expert(E);
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < K; ++j)
            by_expert[T == 3 ? (i + 2 * j) % E : (j == 0 ? 0 : 1 + i % 4)].push_back(i * K + j);
        const TestExperts ex(cs, by_expert, P, 100);
        // Dense reference rows: the T tokens, repeated (row tok + T is token tok).
        const int64_t rows = std::max(13, 2 * T + 3);
        auto x = testing::RandomVector(static_cast<size_t>(rows * cs.k), 55);
        for (int64_t r = T; r < rows; ++r)
          std::copy_n(x.begin() + (r % T) * cs.k, cs.k, x.begin() + r * cs.k);
        DeviceBuffer xd = Upload(x), y1(P * cs.n * 4), u(rows * cs.n * 4), yd(rows * cs.n * 4);
        Stream s;
        ExpertLinearParams p = ex.Params(xd, K, y1.as<float>());
        Memset(p.y, 0xff, P * cs.n * 4, s.get());  // poison: every pair's row must be written
        ex.Launch(p, dual, u, s.get());
        std::vector<float> got(P * cs.n), pre(P * cs.n);
        CopyToHost(got.data(), p.y, got.size() * 4, s.get());
        // The same launch with the rows quantized by the caller (LaunchActQuantRows).
        DeviceBuffer qb(T * QuantizedLd(cs.k) * 2), sb(T * QuantizedScales(cs.k) * 4);
        p.xq = LaunchActQuantRows(xd.as<float>(), cs.k, T, cs.k, qb.as<uint16_t>(), sb.as<float>(),
                                  s.get());
        p.x = nullptr;
        Memset(p.y, 0xff, P * cs.n * 4, s.get());
        const int64_t rows_before = QExpertRowsLaunches();
        ex.Launch(p, dual, u, s.get());
        const int min_slots = GetKernelOptions().qexpert_rows_min_slots;
        if (cs.format == WeightFormat::kFp4 && !dual && min_slots > 0 && p.max_slots >= min_slots) {
          EXPECT_GT(QExpertRowsLaunches(), rows_before) << name << " row-tile kernel";
        }
        CopyToHost(pre.data(), p.y, pre.size() * 4, s.get());
        s.Synchronize();
        EXPECT_EQ(0, std::memcmp(got.data(), pre.data(), got.size() * 4))
            << name << " pre-quantized rows";
        std::vector<float> want(cs.n), r1(cs.n), r3(cs.n), dense(rows * cs.n);
        double err = 0;
        for (int e = 0; e < E; ++e) {
          if (by_expert[e].empty()) continue;
          LinearParams d =
              DenseParams(Case{cs.format, rows, cs.n, cs.k}, ex.hw[e], ex.wd[e], ex.sd[e], xd);
          d.y = yd.as<float>();
          if (dual) {
            WeightRef w3 = d.w;
            w3.data = ex.wd[E + e].get();
            w3.scale = ex.sd[E + e].get();
            LaunchLinearSwiglu(d, w3, u.as<float>(), 0.7f, s.get());
          } else {
            LaunchLinear(d, s.get());
          }
          CopyToHost(dense.data(), yd.get(), dense.size() * 4, s.get());
          s.Synchronize();
          for (const int32_t pr : by_expert[e]) {
            const int tok = pr / K;
            EXPECT_EQ(
                0, std::memcmp(got.data() + pr * cs.n, dense.data() + (tok + T) * cs.n, cs.n * 4))
                << name << " expert " << e << " pair " << pr;
            cpu::Linear(x.data() + tok * cs.k, 1, cs.k, ex.hw[e].view(), cs.n, r1.data(), nullptr);
            cpu::Linear(x.data() + tok * cs.k, 1, cs.k, ex.hw[E + e].view(), cs.n, r3.data(),
                        nullptr);
            for (int64_t i = 0; i < cs.n; ++i) {
              const float gg = std::min(r1[i], 0.7f), uu = std::clamp(r3[i], -0.7f, 0.7f);
              want[i] = dual ? gg / (1.0f + std::exp(-gg)) * uu : r1[i];
            }
            err = std::max(
                err, testing::RelativeError(
                         std::vector<float>(got.begin() + pr * cs.n, got.begin() + (pr + 1) * cs.n),
                         want));
          }
        }
        EXPECT_LE(err, 1e-5) << name;
      }
    }
}

// The fused SwiGLU linear (one launch over W1 and W3): the CPU's SwiGLU of the two linears, and
// batch invariant (each row alone gives the same bits).
TEST(LinearTest, FusedSwigluMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const Case cs : {Case{WeightFormat::kFp8, 1, 300, 4096}, Case{WeightFormat::kFp8, 19, 300, 4096},
                        Case{WeightFormat::kFp4, 1, 208, 4096}, Case{WeightFormat::kFp4, 2, 96, 2048},
                        Case{WeightFormat::kBf16, 1, 64, 1024}, Case{WeightFormat::kFp8, 3, 64, 8192}}) {
    HostWeight h1 = MakeWeight(cs.format, cs.n, cs.k, 21), h3 = MakeWeight(cs.format, cs.n, cs.k, 22);
    auto x = testing::RandomVector(static_cast<size_t>(cs.m * cs.k), 23);
    const float limit = 0.7f;  // small enough that the clamp matters
    std::vector<float> r1(cs.m * cs.n), r3(cs.m * cs.n), want(cs.m * cs.n);
    cpu::Linear(x.data(), cs.m, cs.k, h1.view(), cs.n, r1.data(), nullptr);
    cpu::Linear(x.data(), cs.m, cs.k, h3.view(), cs.n, r3.data(), nullptr);
    for (size_t i = 0; i < want.size(); ++i) {
      const float gg = std::min(r1[i], limit), uu = std::clamp(r3[i], -limit, limit);
      want[i] = gg / (1.0f + std::exp(-gg)) * uu;
    }
    DeviceBuffer w1(h1.data.size()), s1(std::max<size_t>(h1.scale.size(), 1)), w3(h3.data.size()),
        s3(std::max<size_t>(h3.scale.size(), 1)), xd(x.size() * 4), g(cs.m * cs.n * 4),
        u(cs.m * cs.n * 4), one(cs.n * 4);
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
    Memset(g.get(), 0xff, g.bytes(), s.get());
    p.y = g.as<float>();
    LaunchLinearSwiglu(p, w3ref, u.as<float>(), limit, s.get());
    std::vector<float> got(cs.m * cs.n), last(cs.n);
    CopyToHost(got.data(), g.get(), got.size() * 4, s.get());
    LinearParams a = p;
    a.x = xd.as<float>() + (cs.m - 1) * cs.k;
    a.m = 1;
    a.y = one.as<float>();
    LaunchLinearSwiglu(a, w3ref, u.as<float>(), limit, s.get());
    CopyToHost(last.data(), one.get(), last.size() * 4, s.get());
    s.Synchronize();
    const std::string name = "format " + std::to_string(static_cast<int>(cs.format)) + " m=" +
                             std::to_string(cs.m) + " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k);
    EXPECT_LE(testing::RelativeError(got, want), 1e-5) << name;
    EXPECT_EQ(0, std::memcmp(last.data(), got.data() + (cs.m - 1) * cs.n, last.size() * 4)) << name;
  }
}

// Dense FP8 linears of many rows take the tiled GEMM (qgemm_sm90.cu); each of their rows must have
// the bits of that row run alone (the decode kernel, quantized in the kernel): single weights and
// the fused SwiGLU pair, n not a multiple of the 128-row block, k with a short last slice and past
// 4096, grouped input (wo_a), more 128 x 128 output tiles than an H200 has SMs (the
// warp-specialized kernel's persistent blocks take several). Also within float rounding of the CPU.
TEST(LinearTest, TiledGemmEqualsRowByRow) {
  SKIP_WITHOUT_GPU();
  struct TCase {
    int64_t m, n, k;
    bool dual;
    int64_t groups;  // > 1: n = groups x rows, each group reading its own k columns
  };
  for (const TCase tc : {TCase{130, 128, 256, false, 1}, TCase{300, 144, 4096, false, 1},
                         TCase{257, 1040, 1344, false, 1}, TCase{200, 512, 7168, false, 1},
                         TCase{130, 300, 1344, false, 1}, TCase{150, 256, 2048, true, 1},
                         TCase{129, 300, 1024, true, 1}, TCase{150, 300, 1344, true, 1},
                         TCase{140, 256, 256, false, 2}, TCase{140, 512, 256, false, 2},
                         TCase{520, 256, 1344, false, 1}, TCase{512, 384, 1024, true, 1},
                         TCase{1100, 2100, 320, false, 1}, TCase{1100, 1000, 640, true, 1}}) {
    const std::string name = "m=" + std::to_string(tc.m) + " n=" + std::to_string(tc.n) +
                             " k=" + std::to_string(tc.k) + (tc.dual ? " dual" : "") +
                             " groups=" + std::to_string(tc.groups);
    const int64_t G = tc.groups, ldx = G * tc.k;
    HostWeight h1 = MakeWeight(WeightFormat::kFp8, tc.n, tc.k, 31, /*spread=*/true);
    HostWeight h3 = MakeWeight(WeightFormat::kFp8, tc.n, tc.k, 32, /*spread=*/true);
    auto x = testing::RandomVector(static_cast<size_t>(tc.m * ldx), 33);
    for (int64_t i = 0; i < tc.m * ldx; ++i)  // act_quant scales that differ by row and block
      x[i] = std::ldexp(x[i], static_cast<int>((7 * (i / ldx) + 3 * (i % ldx / 128)) % 9) - 4);
    DeviceBuffer w1(h1.data.size()), s1(h1.scale.size()), w3(h3.data.size()), s3(h3.scale.size()),
        xd(x.size() * 4), yd(tc.m * tc.n * 4), ud(tc.m * tc.n * 4), one(tc.n * 4), u1(tc.n * 4),
        aq(tc.m * ldx * 2 + 64), as((tc.m + 127) / 128 * 128 * ((ldx + 127) / 128) * 4 + 64);
    CopyToDeviceSync(w1.get(), h1.data.data(), h1.data.size());
    CopyToDeviceSync(s1.get(), h1.scale.data(), h1.scale.size());
    CopyToDeviceSync(w3.get(), h3.data.data(), h3.data.size());
    CopyToDeviceSync(s3.get(), h3.scale.data(), h3.scale.size());
    CopyToDeviceSync(xd.get(), x.data(), x.size() * 4);
    Stream s;
    LinearParams p = DenseParams(Case{WeightFormat::kFp8, tc.m, tc.n, tc.k}, h1, w1, s1, xd);
    p.ldx = ldx;
    if (G > 1) {
      p.x_group_rows = tc.n / G;
      p.x_group_stride = tc.k;
    }
    p.y = yd.as<float>();
    p.aq.q = aq.as<uint8_t>();
    p.aq.q_bytes = static_cast<int64_t>(aq.bytes());
    p.aq.s = as.as<float>();
    p.aq.s_count = static_cast<int64_t>(as.bytes() / 4);
    WeightRef w3ref = p.w;
    w3ref.data = w3.get();
    w3ref.scale = s3.get();
    const float limit = 0.7f;
    auto run = [&](const LinearParams& q, float* u) {
      if (tc.dual)
        LaunchLinearSwiglu(q, w3ref, u, limit, s.get());
      else
        LaunchLinear(q, s.get());
    };
    Memset(yd.get(), 0xff, yd.bytes(), s.get());  // an element never written shows as NaN
    const int64_t tiled_before = QGemmLaunches(), ws_before = QGemmWsLaunches(),
                  ws_t_before = QGemmWsScalesTLaunches();
    run(p, ud.as<float>());
    const int64_t from = GetKernelOptions().qgemm_min_rows;
    if (from > 0 && tc.m >= from) {  // the tiled GEMM ran (the default from 512 rows; the variant)
      if (GetKernelOptions().qgemm_wgmma) {
        EXPECT_GT(QGemmWsLaunches(), ws_before) << name << ": the warp-specialized kernel";
        // The launcher's pre-pass writes the scales transposed when asked (its scratch holds
        // whole 128-token tiles here), else in their natural order.
        EXPECT_EQ(QGemmWsScalesTLaunches() > ws_t_before, GetKernelOptions().qgemm_ws_scales_t)
            << name << ": transposed scales";
      } else {
        EXPECT_GT(QGemmLaunches(), tiled_before) << name;
      }
    }
    std::vector<float> got(tc.m * tc.n), row(tc.n);
    CopyToHost(got.data(), yd.get(), got.size() * 4, s.get());
    s.Synchronize();
    int64_t differ = 0;
    for (int64_t r = 0; r < tc.m; ++r) {
      LinearParams a = p;
      a.x = xd.as<float>() + r * ldx;
      a.m = 1;
      a.y = one.as<float>();
      a.aq = ActQuantScratch{};
      run(a, u1.as<float>());
      CopyToHost(row.data(), one.get(), row.size() * 4, s.get());
      s.Synchronize();
      differ += std::memcmp(row.data(), got.data() + r * tc.n, row.size() * 4) != 0;
    }
    EXPECT_EQ(differ, 0) << name << ": rows whose bits differ from the row run alone";
    if (!tc.dual) {  // the CPU reference, group by group
      std::vector<float> ref(tc.m * tc.n);
      const int64_t R = tc.n / G;
      for (int64_t gi = 0; gi < G; ++gi) {
        cpu::Gemm(x.data() + gi * tc.k, tc.m, tc.k, ldx, h1.view().Offset(gi * R, tc.k), R,
                  ref.data() + gi * R, tc.n, nullptr);
      }
      EXPECT_LE(testing::RelativeError(got, ref), 1e-5) << name;
    }
  }
}

// Routed experts of many rows take the tiled GEMM (qgemm_sm90.cu, from --qgemm-expert-min-rows
// rows per expert): FP4 and FP8, one weight and the fused SwiGLU pair, a skewed routing (expert 0
// takes every token, so its slot loops over more token tiles than the grid has), n not a multiple
// of the 128-row block, an odd number of 64-column pairs. Each pair's row must have the bits of
// its token run alone through its expert as a dense linear (the decode kernel, quantized in the
// kernel); and the launch must be the tiled one when the option asks for it. With pre-quantized
// rows and the scratch given, the warpgroup-MMA GEMM takes them through a staged copy; without,
// through the launcher's own pre-pass.
TEST(LinearTest, TiledExpertsEqualRowByRow) {
  SKIP_WITHOUT_GPU();
  for (const Case cs :
       {Case{WeightFormat::kFp4, 0, 272, 1344}, Case{WeightFormat::kFp4, 0, 128, 4096},
        Case{WeightFormat::kFp8, 0, 200, 1024}}) {
    for (const int variant : {0, 1, 2}) {
      const bool dual = variant == 1, prequant = variant != 2;
      const std::string name = "format " + std::to_string(static_cast<int>(cs.format)) +
                               " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k) +
                               (dual ? " swiglu" : "") + (prequant ? "" : " own pre-pass");
      const int E = 6, K = 2, T = 200, P = T * K;
      // Token i: expert 0, and expert 1 + (i * 7 + i / 5) % (E - 1).
      std::vector<std::vector<int32_t>> by_expert(E);
      for (int i = 0; i < T; ++i) {
        by_expert[0].push_back(i * K);
        by_expert[1 + (i * 7 + i / 5) % (E - 1)].push_back(i * K + 1);
      }
      const TestExperts ex(cs, by_expert, P, 300);
      auto x = testing::RandomVector(static_cast<size_t>(T * cs.k), 77);
      for (int64_t i = 0; i < T * cs.k; ++i)  // act_quant scales that differ by row and block
        x[i] = std::ldexp(x[i], static_cast<int>((5 * (i / cs.k) + 3 * (i % cs.k / 128)) % 9) - 4);
      DeviceBuffer xd = Upload(x), yd(P * cs.n * 4), u(P * cs.n * 4), one(cs.n * 4), u1(cs.n * 4),
                   qb(T * QuantizedLd(cs.k) * 2), sb(T * QuantizedScales(cs.k) * 4),
                   aq(T * QuantizedLd(cs.k) * 2), as(T * QuantizedScales(cs.k) * 4);
      Stream s;
      ExpertLinearParams p = ex.Params(xd, K, yd.as<float>());
      p.max_slots = E;  // rows per slot as the model's launches expect them: P / E
      if (prequant) {
        p.xq = LaunchActQuantRows(xd.as<float>(), cs.k, T, cs.k, qb.as<uint16_t>(), sb.as<float>(),
                                  s.get());
      }
      p.aq.q = aq.as<uint8_t>();
      p.aq.q_bytes = static_cast<int64_t>(aq.bytes());
      p.aq.s = as.as<float>();
      p.aq.s_count = static_cast<int64_t>(as.bytes() / 4);
      Memset(p.y, 0xff, P * cs.n * 4, s.get());  // poison: every pair's row must be written
      const int64_t tiled_before = QGemmLaunches(), wg_before = QGemmWgLaunches();
      ex.Launch(p, dual, u, s.get());
      const int64_t from = GetKernelOptions().qgemm_expert_min_rows;
      if (from > 0 && P / E >= from) {
        if (GetKernelOptions().qgemm_wgmma) {
          EXPECT_GT(QGemmWgLaunches(), wg_before) << name;
        } else {
          EXPECT_GT(QGemmLaunches(), tiled_before) << name;
        }
      }
      std::vector<float> got(P * cs.n), row(cs.n);
      CopyToHost(got.data(), p.y, got.size() * 4, s.get());
      s.Synchronize();
      int64_t differ = 0;
      for (int e = 0; e < E; ++e) {
        for (const int32_t pr : by_expert[e]) {
          const int tok = pr / K;
          LinearParams d =
              DenseParams(Case{cs.format, 1, cs.n, cs.k}, ex.hw[e], ex.wd[e], ex.sd[e], xd);
          d.x = xd.as<float>() + tok * cs.k;
          d.y = one.as<float>();
          if (dual) {
            WeightRef w3 = d.w;
            w3.data = ex.wd[E + e].get();
            w3.scale = ex.sd[E + e].get();
            LaunchLinearSwiglu(d, w3, u1.as<float>(), 0.7f, s.get());
          } else {
            LaunchLinear(d, s.get());
          }
          CopyToHost(row.data(), one.get(), row.size() * 4, s.get());
          s.Synchronize();
          differ += std::memcmp(row.data(), got.data() + pr * cs.n, cs.n * 4) != 0;
        }
      }
      EXPECT_EQ(differ, 0) << name << ": pairs whose bits differ from the token run alone";
    }
  }
}

// A bf16 tensor-core launch of m rows x (ldx = k) against the n x k weights w, into y (ldy = n),
// through the split scratch sp.
Bf16TcLinearParams Bf16TcParams(const DeviceBuffer& w, int64_t n, int64_t k, const DeviceBuffer& x,
                                int64_t m, const DeviceBuffer& sp, const DeviceBuffer& y) {
  Bf16TcLinearParams p;
  p.w = w.as<uint16_t>();
  p.n = n;
  p.k = k;
  p.x = x.as<float>();
  p.ldx = k;
  p.m = m;
  p.split = sp.as<uint16_t>();
  p.y = y.as<float>();
  p.ldy = n;
  return p;
}

// The tensor-core bf16 linear (bf16_tc_linear): each row of a 130-row launch (the warpgroup-MMA
// tile) and of a 20-row one has the bits of the row run alone, launches with each token tile
// forced (8, 64 or 128 tokens) and one on rows split beforehand (presplit) the bits of the launch
// itself, and the result is fp32-accurate
// against a double-precision reference (the split operands are exact), for k a multiple of the
// 64-column stage and not, n not a multiple of the block's rows, k in 8 slices (what n = 1,000 rows
// get), 2 and 1 (the head's).
TEST(Bf16TcLinearTest, RowsEqualAloneAndMatchDouble) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(Bf16TcSlices(1000, 4096), 8);
  EXPECT_EQ(Bf16TcSlices(1000, 592), 2);  // 10 stages
  EXPECT_EQ(Bf16TcSlices(129280, 4096), 1);
  EXPECT_EQ(Bf16TcSlices(2048, 4096), 8);
  EXPECT_EQ(Bf16TcSlices(4096, 4096), 4);
  struct SliceCase {
    int64_t k;
    int slices;  // 0: Bf16TcSlices
  };
  for (const SliceCase cs : {SliceCase{4096, 0}, SliceCase{4096, 1}, SliceCase{592, 0}}) {
    const int64_t n = 1000, k = cs.k;
    auto wf = testing::RandomVector(static_cast<size_t>(n * k), 91, 0.2f);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) w[i] = FloatToBf16(wf[i]);
    // kAuto's tiles: the warpgroup-MMA one (130 rows, a partial last tile) and the 8-token one.
    for (const int64_t m : {4 * kBf16TcManyRows + 2, kBf16TcManyRows - 12}) {
      auto x = testing::RandomVector(static_cast<size_t>(m * k), 92 + static_cast<uint32_t>(m));
      for (int64_t i = 0; i < m * k; ++i)  // magnitudes that need all three parts
        x[i] = std::ldexp(x[i], static_cast<int>((5 * (i / k) + 3 * (i % k)) % 11) - 5);
      DeviceBuffer wd = Upload(w), xd = Upload(x), yd(m * n * 4), one(n * 4),
                   sp(Bf16SplitElements(m, k) * 2);
      Stream s;
      Bf16TcLinearParams p = Bf16TcParams(wd, n, k, xd, m, sp, yd);
      p.k_slices = cs.slices;
      ASSERT_TRUE(Bf16TcLinearSupports(n, k));
      const int64_t wg_before = Bf16TcWgLaunches();
      LaunchBf16TcLinear(p, s.get());
      EXPECT_EQ(Bf16TcWgLaunches() > wg_before, m >= kBf16TcWgRows) << "the warpgroup-MMA tile";
      std::vector<float> got(m * n), row(n), pre(m * n), other(m * n);
      CopyToHost(got.data(), yd.get(), got.size() * 4, s.get());
      for (const Bf16TcTile tile : {Bf16TcTile::kFew, Bf16TcTile::kMany, Bf16TcTile::kWg}) {
        DeviceBuffer yo(m * n * 4);
        Bf16TcLinearParams a = p;
        a.tile = tile;
        a.y = yo.as<float>();
        LaunchBf16TcLinear(a, s.get());
        CopyToHost(other.data(), yo.get(), other.size() * 4, s.get());
        s.Synchronize();
        EXPECT_EQ(std::memcmp(other.data(), got.data(), got.size() * 4), 0)
            << "token tile " << static_cast<int>(tile) << ", m " << m << ", k " << k;
      }
      {  // the same rows split beforehand
        DeviceBuffer yp(m * n * 4), sp2(Bf16SplitElements(m, k) * 2);
        LaunchBf16Split(xd.as<float>(), k, m, k, sp2.as<uint16_t>(), s.get());
        Bf16TcLinearParams a = p;
        a.split = sp2.as<uint16_t>();
        a.presplit = true;
        a.y = yp.as<float>();
        LaunchBf16TcLinear(a, s.get());
        CopyToHost(pre.data(), yp.get(), pre.size() * 4, s.get());
        s.Synchronize();
      }
      s.Synchronize();
      EXPECT_EQ(std::memcmp(pre.data(), got.data(), got.size() * 4), 0) << "presplit";
      int64_t differ = 0;
      double worst = 0.0;
      for (int64_t r = 0; r < m; ++r) {
        Bf16TcLinearParams a = p;
        a.x = xd.as<float>() + r * k;
        a.m = 1;
        a.y = one.as<float>();
        LaunchBf16TcLinear(a, s.get());
        CopyToHost(row.data(), one.get(), row.size() * 4, s.get());
        s.Synchronize();
        differ += std::memcmp(row.data(), got.data() + r * n, n * 4) != 0;
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0.0, mag = 0.0;
          for (int64_t c = 0; c < k; ++c) {
            const double prod = static_cast<double>(Bf16ToFloat(w[j * k + c])) * x[r * k + c];
            ref += prod;
            mag += std::fabs(prod);
          }
          worst = std::max(worst, std::fabs(got[r * n + j] - ref) / std::max(mag, 1e-30));
        }
      }
      const std::string name = "k=" + std::to_string(k) + " m=" + std::to_string(m) +
                               " slices=" + std::to_string(cs.slices);
      EXPECT_EQ(differ, 0) << name << ": rows whose bits differ from the row run alone";
      std::printf("[bf16 tc] %s: worst error / sum|products| %.3g\n", name.c_str(), worst);
      EXPECT_LE(worst, 1e-5) << name << ": error relative to the sum of |products|";
    }
  }
}

// The warpgroup-MMA tile (128 tokens over several token tiles, 64, 32) on a matrix of more than
// 32 MB (its blocks walk the token tiles fastest), k in 4 slices: the bits of the 8-token tile
// (decode's) and of the 64-token tile, for every row.
TEST(Bf16TcLinearTest, WgTileEqualsOtherTiles) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 4200, k = 4096, rows = 300;
  EXPECT_EQ(Bf16TcSlices(n, k), 4);
  auto wf = testing::RandomVector(static_cast<size_t>(n * k), 93, 0.2f);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) w[i] = FloatToBf16(wf[i]);
  auto x = testing::RandomVector(static_cast<size_t>(rows * k), 94);
  for (int64_t i = 0; i < rows * k; ++i)
    x[i] = std::ldexp(x[i], static_cast<int>((7 * (i / k) + 5 * (i % k)) % 13) - 6);
  DeviceBuffer wd = Upload(w), xd = Upload(x), sp(Bf16SplitElements(rows, k) * 2);
  Stream s;
  auto run = [&](Bf16TcTile tile, int64_t m) {
    DeviceBuffer yd(m * n * 4);
    Memset(yd.get(), 0xff, yd.bytes(), s.get());  // an element never written shows as NaN
    Bf16TcLinearParams p = Bf16TcParams(wd, n, k, xd, m, sp, yd);
    p.tile = tile;
    LaunchBf16TcLinear(p, s.get());
    std::vector<float> y(m * n);
    CopyToHost(y.data(), yd.get(), y.size() * 4, s.get());
    s.Synchronize();
    return y;
  };
  for (const int64_t m : {rows, int64_t{50}, int64_t{32}}) {  // token tiles of 128, 64, 32
    const int64_t wg_before = Bf16TcWgLaunches();
    const std::vector<float> wg = run(Bf16TcTile::kAuto, m);
    EXPECT_GT(Bf16TcWgLaunches(), wg_before) << m << " rows";
    EXPECT_TRUE(std::all_of(wg.begin(), wg.end(), [](float v) { return std::isfinite(v); }));
    for (const Bf16TcTile tile : {Bf16TcTile::kFew, Bf16TcTile::kMany}) {
      const std::vector<float> other = run(tile, m);
      int64_t differ = 0;
      for (int64_t r = 0; r < m; ++r)
        differ += std::memcmp(other.data() + r * n, wg.data() + r * n, n * 4) != 0;
      EXPECT_EQ(differ, 0) << m << " rows: rows whose bits differ from token tile "
                           << static_cast<int>(tile);
    }
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda
