// The FP8-instruction numerics mode's CUDA linears (backend/cuda/fp8mma_linear.cuh) against its
// CPU reference (cpu::Gemm with WeightView::mma: cpu::ActQuantCodes, cpu::Fp8MmaGemm), bit for
// bit: act_quant's codes and scales, dense FP8 and FP4 linears over many shapes (one row to
// hundreds, k not a multiple of 128, n not a multiple of 128) through each kernel (the TMA tile,
// the gather tile, the slice split: the test checks which ran), grouped input, routed experts
// (more pairs than a token tile in a slot), and the SwiGLU pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/runtime.h"
#include "base/check.h"
#include "base/dtype.h"
#include "base/thread_pool.h"
#include "gpu_test_util.h"
#include "io/quant.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

ThreadPool& Pool() {
  static ThreadPool pool;
  return pool;
}

// A weight in the mode's layout (uploaded) and its CPU operand (codes, per-row scales).
struct MmaWeight {
  WeightFormat format;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> data;     // the checkpoint's bytes (the device layout)
  std::vector<uint8_t> scale;    // MmaScaleBytes of the packed scales
  std::vector<uint8_t> codes;    // CPU: [n, k] e4m3
  std::vector<float> row_scale;  // CPU: [n, k / bc]
  int bc = 128;
  DeviceBuffer wd, sd;

  MmaWeight(WeightFormat f, int64_t n_, int64_t k_, uint32_t seed) : format(f), n(n_), k(k_) {
    auto w = testing::RandomVector(static_cast<size_t>(n * k), seed, 0.2f);
    // Each 128 x 128 block scaled by its own power of two, so that a wrong scale index shows.
    for (int64_t i = 0; i < n * k; ++i)
      w[i] = std::ldexp(w[i], static_cast<int>((3 * (i / k / 128) + 5 * (i % k / 128)) % 7) - 3);
    codes.resize(static_cast<size_t>(n * k));
    scale.resize(static_cast<size_t>(MmaScaleBytes(n, k)));
    if (f == WeightFormat::kFp8) {
      const auto q = io::QuantizeFp8Blocks(w, n, k, 128);
      data = q.data;
      codes = q.data;
      const int64_t nb = (k + 127) / 128;
      row_scale.resize(static_cast<size_t>(n * nb));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t b = 0; b < nb; ++b)
          row_scale[r * nb + b] = E8M0ToFloat(q.scale[(r / 128) * nb + b]);
      PackMmaScalesFp8(row_scale.data(), n, k, reinterpret_cast<float*>(scale.data()));
    } else {
      // Groups of a 128-column block 0 to 14 binades apart (varying by row), so that every shift
      // of the re-expression (io::QuantizedToMma: exact to 8, rounded, zeros from 13) shows.
      for (int64_t i = 0; i < n * k; ++i)
        w[i] = std::ldexp(w[i], -static_cast<int>((7 * (i % k / 32) + i / k) % 15));
      const auto q = io::QuantizeFp4(w, n, k);
      data = q.data;
      io::TensorView wv{"w", DType::kU8, q.data_shape, q.data.data(), q.data.size()};
      io::TensorView sv{"s", DType::kF8E8M0, q.scale_shape, q.scale.data(), q.scale.size()};
      auto mo = io::QuantizedToMma(wv, &sv, {n, k}, 128);
      DSINFER_CHECK(mo.ok());
      codes = mo->e4m3;
      row_scale = mo->scale;
      bc = mo->bc;
      PackMmaScalesFp4(q.scale.data(), n, k, scale.data());
    }
    wd = Upload(data);
    sd = Upload(scale);
  }
  WeightRef Ref() const {
    WeightRef r;
    r.format = format;
    r.data = wd.get();
    r.scale = sd.get();
    r.scale_format = ScaleFormat::kF32;
    r.n = n;
    r.k = k;
    r.mma = true;
    return r;
  }
  // The CPU reference's view of rows [row0, row0 + rows).
  cpu::WeightView View(int64_t row0 = 0) const {
    cpu::WeightView v;
    v.act_quant = true;
    v.mma = {codes.data() + row0 * k, row_scale.data() + row0 * ((k + bc - 1) / bc), k, 1, bc};
    return v;
  }
};

// Scratch as the model gives it (every size the mode asks for, and slice partials).
struct Scratch {
  DeviceBuffer q, s, part;
  ActQuantScratch aq;
  // (pairs > 0: a routed experts' launch of `pairs` pairs over `slots` slots.)
  Scratch(int64_t rows, int64_t width, int64_t part_count = 1 << 22, int64_t pairs = 0,
          int64_t slots = 0)
      : q(QBytes(rows, width, pairs, slots)),
        s(SCount(rows, width, pairs, slots) * 4),
        part(part_count * 4) {
    aq.q = q.as<uint8_t>();
    aq.q_bytes = QBytes(rows, width, pairs, slots);
    aq.s = s.as<float>();
    aq.s_count = SCount(rows, width, pairs, slots);
    aq.part = part_count > 0 ? part.as<float>() : nullptr;
    aq.part_count = part_count;
  }
  // Codes and scales no launch wrote (so that a launch reading codes it did not write fails).
  void Poison(const Stream& st) {
    Memset(q.get(), 0x7e, aq.q_bytes, st.get());
    Memset(s.get(), 0xff, aq.s_count * 4, st.get());
  }
  static int64_t QBytes(int64_t rows, int64_t width, int64_t pairs, int64_t slots) {
    return pairs > 0 ? MmaExpertQuantBytes(rows, pairs, slots, width) : MmaQuantBytes(rows, width);
  }
  static int64_t SCount(int64_t rows, int64_t width, int64_t pairs, int64_t slots) {
    return pairs > 0 ? MmaExpertScaleCount(rows, pairs, slots, width) : MmaScaleCount(rows, width);
  }
};

std::string Name(WeightFormat f, int64_t m, int64_t n, int64_t k) {
  return std::string(f == WeightFormat::kFp4 ? "fp4" : "fp8") + " m=" + std::to_string(m) +
         " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// Bitwise equality, with the first differences printed.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) == 0) continue;
    if (++bad <= 3)
      ADD_FAILURE() << what << ": element " << i << ": " << got[i] << " vs CPU " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": elements differing from the CPU reference";
}

TEST(Fp8MmaTest, ActQuantMatchesCpuCodes) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 5, width = 300, ldq = MmaQuantLd(width), ld_t = MmaScaleLd(rows);
  auto x = testing::RandomVector(static_cast<size_t>(rows * width), 7, 3.0f);
  x[10] = 0.0f;
  for (int64_t c = 0; c < 128; ++c) x[2 * width + c] = 0.0f;  // an all-zero block
  DeviceBuffer xd = Upload(x), q(rows * ldq), s((width + 127) / 128 * ld_t * 4);
  Stream st;
  Memset(q.get(), 0x5a, rows * ldq, st.get());
  LaunchMmaActQuant(xd.as<float>(), width, rows, width, q.as<uint8_t>(), ldq, s.as<float>(), ld_t,
                    st.get());
  const auto got_q = Download<uint8_t>(q, rows * ldq, st);
  const auto got_s = Download<float>(s, (width + 127) / 128 * ld_t, st);
  const int64_t nb = (width + 127) / 128;
  std::vector<uint8_t> codes(width);
  std::vector<float> scales(nb);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::ActQuantCodes(x.data() + r * width, width, codes.data(), scales.data());
    for (int64_t c = 0; c < ldq; ++c)
      EXPECT_EQ(got_q[r * ldq + c], c < width ? codes[c] : 0) << "row " << r << " column " << c;
    for (int64_t b = 0; b < nb; ++b)
      EXPECT_EQ(0, std::memcmp(&got_s[b * ld_t + r], &scales[b], 4))
          << "row " << r << " block " << b;
  }
}

struct DenseCase {
  WeightFormat f;
  int64_t m, n, k;
  const char* kernel;  // "tma", "split" or "tile": the launch it must take
};

TEST(Fp8MmaTest, DenseMatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const DenseCase cases[] = {
      {WeightFormat::kFp8, 1, 200, 1024, "split"},   {WeightFormat::kFp8, 3, 64, 96, "tile"},
      {WeightFormat::kFp8, 17, 300, 640, "split"},   {WeightFormat::kFp8, 40, 1024, 4096, "split"},
      {WeightFormat::kFp8, 100, 9000, 512, "tile"},  {WeightFormat::kFp8, 130, 256, 1024, "tma"},
      {WeightFormat::kFp8, 300, 200, 544, "tma"},    {WeightFormat::kFp8, 129, 128, 128, "tma"},
      {WeightFormat::kFp8, 100, 64, 64, "tile"},     {WeightFormat::kFp4, 1, 96, 2048, "split"},
      {WeightFormat::kFp4, 5, 208, 544, "split"},    {WeightFormat::kFp4, 140, 256, 1024, "split"},
      {WeightFormat::kFp4, 2, 64, 96, "tile"},       {WeightFormat::kFp4, 300, 64, 256, "tile"},
      {WeightFormat::kFp4, 200, 8448, 1024, "tile"},
  };
  uint32_t seed = 100;
  for (const DenseCase& cs : cases) {
    const std::string name = Name(cs.f, cs.m, cs.n, cs.k);
    const MmaWeight w(cs.f, cs.n, cs.k, ++seed);
    const int64_t ldx = cs.k + 4, ldy = cs.n + 3;  // strided rows
    auto x = testing::RandomVector(static_cast<size_t>(cs.m * ldx), ++seed, 1.5f);
    DeviceBuffer xd = Upload(x), yd(cs.m * ldy * 4);
    Scratch scr(cs.m, cs.k);
    Stream st;
    Memset(yd.get(), 0xff, cs.m * ldy * 4, st.get());  // poison: every element must be written
    LinearParams p;
    p.w = w.Ref();
    p.aq = scr.aq;
    p.x = xd.as<float>();
    p.ldx = ldx;
    p.m = cs.m;
    p.y = yd.as<float>();
    p.ldy = ldy;
    const int64_t tma = MmaTmaLaunches(), tile = MmaTileLaunches(), split = MmaSplitLaunches();
    LaunchLinear(p, st.get());
    const auto y = Download<float>(yd, cs.m * ldy, st);
    const std::string kernel = MmaTmaLaunches() > tma       ? "tma"
                               : MmaSplitLaunches() > split ? "split"
                               : MmaTileLaunches() > tile   ? "tile"
                                                            : "none";
    EXPECT_EQ(kernel, cs.kernel) << name;
    std::vector<float> want(cs.m * ldy), got(cs.m * cs.n), ref(cs.m * cs.n);
    cpu::Gemm(x.data(), cs.m, cs.k, ldx, w.View(), cs.n, want.data(), ldy, &Pool());
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        got[i * cs.n + j] = y[i * ldy + j];
        ref[i * cs.n + j] = want[i * ldy + j];
      }
    ExpectSameBits(got, ref, name + " (" + kernel + ")");
  }
}

// Grouped input (the attention's wo_a): weight rows of group g read x's columns from g * stride;
// groups of 32 rows (a launch per group), of 128 (one launch; split by slice at 7 rows; FP8 at
// 130 rows on the TMA tile). Then x's codes given instead of x (xq, as the attention's out_c;
// LaunchMmaActQuantRows' here), the scratch poisoned: the same bits.
TEST(Fp8MmaTest, GroupedInputMatchesCpu) {
  SKIP_WITHOUT_GPU();
  struct G {
    int64_t m, group_rows, k, stride;
  };
  for (const WeightFormat f : {WeightFormat::kFp8, WeightFormat::kFp4})
    for (const G gc :
         {G{7, 32, 96, 128}, G{7, 128, 1024, 1024}, G{40, 128, 256, 384}, G{130, 128, 256, 384}}) {
      const int64_t m = gc.m, group_rows = gc.group_rows, groups = 3, n = group_rows * groups,
                    k = gc.k, stride = gc.stride, width = stride * (groups - 1) + k;
      const MmaWeight w(f, n, k, 31);
      auto x = testing::RandomVector(static_cast<size_t>(m * width), 32);
      DeviceBuffer xd = Upload(x), yd(m * n * 4);
      Scratch scr(m, width);
      Stream st;
      LinearParams p;
      p.w = w.Ref();
      p.aq = scr.aq;
      p.x = xd.as<float>();
      p.ldx = width;
      p.m = m;
      p.x_group_rows = group_rows;
      p.x_group_stride = stride;
      p.y = yd.as<float>();
      p.ldy = n;
      const int64_t tma = MmaTmaLaunches();
      LaunchLinear(p, st.get());
      const auto y = Download<float>(yd, m * n, st);
      // (FP8 from 128 rows in 128-row groups: the TMA tile, each row block at its group's columns.)
      EXPECT_EQ(MmaTmaLaunches() > tma, f == WeightFormat::kFp8 && m >= 128 && group_rows == 128);
      std::vector<float> want(m * n);
      for (int64_t g = 0; g < groups; ++g)
        cpu::Gemm(x.data() + g * stride, m, k, width, w.View(g * group_rows), group_rows,
                  want.data() + g * group_rows, n, &Pool());
      const std::string name = "grouped " + Name(f, m, n, k) + " of " + std::to_string(group_rows);
      ExpectSameBits(y, want, name);
      DeviceBuffer xc(MmaQuantBytes(m, width)), xcs(MmaScaleCount(m, width) * 4);
      p.xq = LaunchMmaActQuantRows(xd.as<float>(), width, m, width, xc.as<uint8_t>(),
                                   xcs.as<float>(), st.get());
      p.x = nullptr;
      scr.Poison(st);
      Memset(yd.get(), 0xff, m * n * 4, st.get());
      LaunchLinear(p, st.get());
      ExpectSameBits(Download<float>(yd, m * n, st), want, name + ", codes given");
    }
}

// `count` weights of n x k (seeds seed, seed + 1, ...) and their device pointer arrays.
struct ExpertWeights {
  std::vector<MmaWeight> w;
  DeviceBuffer dd, sd;
  ExpertWeights(WeightFormat f, int count, int64_t n, int64_t k, uint32_t seed) {
    w.reserve(count);
    std::vector<const void*> data, scale;
    for (int e = 0; e < count; ++e) {
      w.emplace_back(f, n, k, seed + e);
      data.push_back(w.back().wd.get());
      scale.push_back(w.back().sd.get());
    }
    dd = Upload(data);
    sd = Upload(scale);
  }
  // The pointer arrays from weight i on.
  const void* const* Data(int i) const {
    return reinterpret_cast<const void* const*>(dd.as<uint8_t>() + i * sizeof(void*));
  }
  const void* const* Scale(int i) const {
    return reinterpret_cast<const void* const*>(sd.as<uint8_t>() + i * sizeof(void*));
  }
};

// A W1 / W3 -> W2 chain's output with codes handed on (got) against the fp32 chain's (want): the
// same bits, and want finite and not all zeros (the chain reached W2's output).
void ExpectChainBits(const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& name) {
  ExpectSameBits(got, want, name);
  EXPECT_TRUE(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); }))
      << name;
  EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float v) { return v != 0; })) << name;
}

// T tokens' K pairs over E experts as a launch's device arrays: each token's first pair to expert
// 0, the others to expert 1 + token % 4.
struct Routing {
  int E, P;
  std::vector<std::vector<int32_t>> by_expert;
  DeviceBuffer ad, nd, od, pd;
  Routing(int T, int K, int E_) : E(E_), P(T * K), by_expert(E_) {
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < K; ++j) by_expert[j == 0 ? 0 : 1 + i % 4].push_back(i * K + j);
    std::vector<int32_t> active, offsets{0}, pairs;
    for (int e = 0; e < E; ++e) {
      if (by_expert[e].empty()) continue;
      active.push_back(e);
      pairs.insert(pairs.end(), by_expert[e].begin(), by_expert[e].end());
      offsets.push_back(static_cast<int32_t>(pairs.size()));
    }
    ad = Upload(active);
    nd = Upload(std::vector<int32_t>{static_cast<int32_t>(active.size())});
    od = Upload(offsets);
    pd = Upload(pairs);
  }
  // A launch of `w`'s experts (pointer arrays [E]) over x ([*, ldx], pair p reads row p / div)
  // into y ([P, ldy]).
  ExpertLinearParams Params(const ExpertWeights& w, const float* x, int64_t ldx, int div, float* y,
                            int64_t ldy, const ActQuantScratch& aq) const {
    ExpertLinearParams p;
    p.shape = w.w[0].Ref();
    p.aq = aq;
    p.data = w.Data(0);
    p.scale = w.Scale(0);
    p.x = x;
    p.ldx = ldx;
    p.x_row_div = div;
    p.y = y;
    p.ldy = ldy;
    p.active = ad.as<int32_t>();
    p.num_active = nd.as<int32_t>();
    p.offsets = od.as<int32_t>();
    p.pairs = pd.as<int32_t>();
    p.max_slots = E;
    p.total_pairs = P;
    return p;
  }
};

// Routed experts: pair p (token p / K) through its expert; every pair's row the CPU's, so also the
// same bits as the token's row of a dense launch. From T = 100 the warp-specialized kernel runs
// (unless --no-fp8mma-ws-experts): expert 0 takes T pairs, the others about T / 4 each, so its
// token tiles end in every narrower tile (T 100: 100 rows, N 128; 150: 128 + 22, N 32; 220: 128 +
// 92, N 96; the others' 25 / 37-38 / 55: N 32 / 64 / 64); at T = 150 one block walks both of
// expert 0's tiles. From T = 330 (more than 128 pairs a slot) FP4 takes the 192-token tile
// (unless --no-fp8mma-wide-experts): T 330: 192 + 138, N 160, the others' 82-83: N 96, two blocks
// a slot; T 400: 192 + 192 + 16, N 32, one block walking two of them, the others' 100: N 128.
TEST(Fp8MmaTest, ExpertsMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (const WeightFormat f : {WeightFormat::kFp4, WeightFormat::kFp8})
    for (const int T : {1, 3, 21, 100, 150, 220, 330, 400})
      for (const bool dual : {false, true}) {
        // (T 150: k 2,048, a block's 16 k blocks through the ring's stages, 4 slices; T 400: k
        // 1,536, 3 slices, the wide tile's running totals through shared memory.)
        const int64_t n = f == WeightFormat::kFp4 ? 192 : 200;
        const int64_t k = T == 150 ? 2048 : T == 400 ? 1536 : 512;
        const int E = 5, K = 2, P = T * K;
        const std::string name = "experts " + Name(f, T, n, k) + (dual ? " swiglu" : "");
        const Routing route(T, K, E);
        const auto& by_expert = route.by_expert;
        const ExpertWeights ws(f, 2 * E, n, k, 200);
        auto x = testing::RandomVector(static_cast<size_t>(T * k), 77);
        DeviceBuffer xd = Upload(x), yd(P * n * 4), ud(P * n * 4);
        Scratch scr(T, k, 1 << 22, P, E);
        Stream st;
        Memset(yd.get(), 0xff, P * n * 4, st.get());
        ExpertLinearParams p = route.Params(ws, xd.as<float>(), k, K, yd.as<float>(), n, scr.aq);
        const float lim = 0.7f;
        const int64_t ws_before = MmaWsExpertLaunches();
        const int64_t tma_before = MmaWsTmaExpertLaunches();
        const int64_t wide_before = MmaWsWideExpertLaunches();
        if (dual) {
          LaunchExpertLinearSwiglu(p, ws.Data(E), ws.Scale(E), ud.as<float>(), lim, st.get());
        } else {
          LaunchExpertLinear(p, st.get());
        }
        const auto y = Download<float>(yd, P * n, st);
        // (Many rows an expert take the warp-specialized gather tile.)
        EXPECT_EQ(MmaWsExpertLaunches() > ws_before,
                  T >= 100 && GetKernelOptions().fp8mma_ws_experts)
            << name;
        // (That tile's tokens fed by the TMA unless --no-fp8mma-tma-experts, k being whole
        // 128-column blocks.)
        EXPECT_EQ(MmaWsTmaExpertLaunches() > tma_before, T >= 100 &&
                                                             GetKernelOptions().fp8mma_ws_experts &&
                                                             GetKernelOptions().fp8mma_tma_experts)
            << name;
        // (FP4's in 192-token tiles past 128 pairs a slot unless --no-fp8mma-wide-experts.)
        EXPECT_EQ(MmaWsWideExpertLaunches() > wide_before,
                  MmaWsTmaExpertLaunches() > tma_before && f == WeightFormat::kFp4 &&
                      (P + E - 1) / E > 128 && GetKernelOptions().fp8mma_wide_experts)
            << name;
        std::vector<float> got(n), want(n), u(n);
        double err = 0;
        for (int e = 0; e < E; ++e)
          for (const int32_t pr : by_expert[e]) {
            const int tok = pr / K;
            cpu::Gemm(x.data() + tok * k, 1, k, k, ws.w[e].View(), n, want.data(), n, nullptr);
            std::copy_n(y.begin() + pr * n, n, got.begin());
            if (!dual) {
              ExpectSameBits(got, want, name + " pair " + std::to_string(pr));
              continue;
            }
            cpu::Gemm(x.data() + tok * k, 1, k, k, ws.w[E + e].View(), n, u.data(), n, nullptr);
            for (int64_t i = 0; i < n; ++i) {
              const float gg = std::min(want[i], lim), uu = std::clamp(u[i], -lim, lim);
              want[i] = gg / (1.0f + std::exp(-gg)) * uu;
            }
            err = std::max(err, testing::RelativeError(got, want));
          }
        if (dual) {
          EXPECT_LE(err, 1e-5) << name;  // (the SiLU's exp: the CUDA and host libms)
        }
      }
}

// The W1 / W3 -> W2 chain with the SwiGLU handed on as act_quant codes in the scratch
// (swiglu_to_aq, the codes returned as W2's xq), and x's codes given (LaunchMmaActQuantRows, as
// the model's XnCodes): W2's output the same bits as through fp32 SwiGLU rows from fp32 x, on
// each tile (T 3: the 8-token tile; 21: the 128-token gather tile; 100 and 220: the
// warp-specialized one, TMA-fed unless --no-fp8mma-tma-experts, W3 reusing W1's gathered rows).
// The scratch is poisoned before each chain, so that codes not written by the chain show.
TEST(Fp8MmaTest, ExpertsSwigluCodesMatchFp32Rows) {
  SKIP_WITHOUT_GPU();
  for (const WeightFormat f : {WeightFormat::kFp4, WeightFormat::kFp8})
    for (const int T : {3, 21, 100, 220}) {
      const int64_t D = 384, I = 256, n2 = 192;
      const int E = 5, K = 2, P = T * K;
      const std::string name = "swiglu codes " + Name(f, T, I, D);
      const Routing route(T, K, E);
      const ExpertWeights w13(f, 2 * E, I, D, 300), w2(f, E, n2, I, 400);
      DeviceBuffer xd = Upload(testing::RandomVector(static_cast<size_t>(T * D), 91)),
                   gd(P * I * 4), ud(P * I * 4), yd(P * n2 * 4), xc(MmaQuantBytes(T, D)),
                   xcs(MmaScaleCount(T, D) * 4);
      Scratch scr(std::max<int64_t>(T, P), std::max(D, I), 1 << 22, P, E);
      Stream st;
      auto chain = [&](bool codes) {
        scr.Poison(st);
        Memset(yd.get(), 0xff, P * n2 * 4, st.get());
        ExpertLinearParams p1 = route.Params(w13, xd.as<float>(), D, K, gd.as<float>(), I, scr.aq);
        p1.swiglu_to_aq = codes;
        if (codes) {
          p1.xq = LaunchMmaActQuantRows(xd.as<float>(), D, T, D, xc.as<uint8_t>(), xcs.as<float>(),
                                        st.get());
        }
        const QuantizedRows gc =
            LaunchExpertLinearSwiglu(p1, w13.Data(E), w13.Scale(E), ud.as<float>(), 0.7f, st.get());
        EXPECT_EQ(gc.c != nullptr, codes) << name;
        ExpertLinearParams p2 = route.Params(w2, gd.as<float>(), I, 1, yd.as<float>(), n2, scr.aq);
        p2.xq = gc;
        LaunchExpertLinear(p2, st.get());
        return Download<float>(yd, P * n2, st);
      };
      const auto want = chain(false);
      ExpectChainBits(chain(true), want, name);
    }
}

// The dense W1 / W3 -> W2 chain (the shared expert's) with the SwiGLU handed on as codes
// (LinearParams::swiglu_to_aq) and x's codes given: W2's output the same bits as through fp32
// SwiGLU rows from fp32 x, on the 8-token tile (m 3), the gather tile (21) and, FP8 from 128 rows,
// the TMA tile (130); the scratch poisoned before each chain.
TEST(Fp8MmaTest, DenseSwigluCodesMatchFp32Rows) {
  SKIP_WITHOUT_GPU();
  for (const WeightFormat f : {WeightFormat::kFp4, WeightFormat::kFp8})
    for (const int64_t m : {3, 21, 130}) {
      const int64_t D = 384, I = 256, n2 = 192;
      const std::string name = "dense swiglu codes " + Name(f, m, I, D);
      const MmaWeight w1(f, I, D, 501), w3(f, I, D, 502), w2(f, n2, I, 503);
      DeviceBuffer xd = Upload(testing::RandomVector(static_cast<size_t>(m * D), 93)),
                   gd(m * I * 4), ud(m * I * 4), yd(m * n2 * 4), xc(MmaQuantBytes(m, D)),
                   xcs(MmaScaleCount(m, D) * 4);
      Scratch scr(m, std::max(D, I));
      Stream st;
      auto chain = [&](bool codes) {
        scr.Poison(st);
        Memset(yd.get(), 0xff, m * n2 * 4, st.get());
        LinearParams p1;
        p1.w = w1.Ref();
        p1.aq = scr.aq;
        p1.x = xd.as<float>();
        p1.ldx = D;
        p1.m = m;
        p1.y = gd.as<float>();
        p1.ldy = I;
        p1.swiglu_to_aq = codes;
        if (codes) {
          p1.xq = LaunchMmaActQuantRows(xd.as<float>(), D, m, D, xc.as<uint8_t>(), xcs.as<float>(),
                                        st.get());
        }
        const QuantizedRows gc = LaunchLinearSwiglu(p1, w3.Ref(), ud.as<float>(), 0.7f, st.get());
        EXPECT_EQ(gc.c != nullptr, codes) << name;
        LinearParams p2 = p1;
        p2.w = w2.Ref();
        p2.x = gd.as<float>();
        p2.ldx = I;
        p2.xq = gc;
        p2.y = yd.as<float>();
        p2.ldy = n2;
        p2.swiglu_to_aq = false;
        LaunchLinear(p2, st.get());
        return Download<float>(yd, m * n2, st);
      };
      const auto want = chain(false);
      ExpectChainBits(chain(true), want, name);
    }
}

}  // namespace
}  // namespace dsinfer::backend::cuda
