// The FP8-instruction linear's CPU reference (backend/wgmma_fp8.h Dot, backend/cpu Fp8MmaGemm,
// ActQuantCodes): operands' scale indexing, slices and promotion units checked where every sum
// is exact; the instruction's truncation where it is not; the CPU GEMM element by element and
// independent of the batch and the thread split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/quant_codec.h"
#include "backend/wgmma_fp8.h"
#include "base/dtype.h"
#include "base/thread_pool.h"
#include "io/quant.h"
#include "io/safetensors.h"

namespace dsinfer::backend {
namespace {

namespace fm = fp8mma;

// An operand with its storage.
struct Owned {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  fm::Operand op;
};

// rows x k codes drawn by `code`, scales 2^[-3, 3] per br x bc block.
template <typename F>
Owned Make(int64_t rows, int64_t k, int br, int bc, std::mt19937& rng, F code) {
  Owned o;
  o.codes.resize(static_cast<size_t>(rows * k));
  for (auto& c : o.codes) c = code();
  o.scales.resize(static_cast<size_t>(((rows + br - 1) / br) * ((k + bc - 1) / bc)));
  for (auto& s : o.scales) s = std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);
  o.op = {o.codes.data(), o.scales.data(), k, br, bc};
  return o;
}

double Exact(const fm::Operand& x, int64_t i, const fm::Operand& w, int64_t j) {
  double s = 0.0;
  for (int64_t c = 0; c < x.k; ++c)
    s += static_cast<double>(qc::E4m3ToFloat(x.Row(i)[c])) * x.Scale(i, c) *
         qc::E4m3ToFloat(w.Row(j)[c]) * w.Scale(j, c);
  return s;
}

// Small integers (e4m3 codes of 0..4, either sign) and power-of-two scales: every step's sum fits
// in the instruction's 13 bits and every promotion is exact, so Dot must be the exact sum. A
// scale taken from the wrong block, a group or slice skipped or counted twice, would show.
TEST(Fp8MmaLinear, ExactWhereEverySumFits) {
  std::mt19937 rng(39);
  const uint8_t small[] = {0x00, 0x38, 0x40, 0x44, 0x48, 0xb8, 0xc0, 0xc4, 0xc8};  // 0, +-1..4
  auto code = [&] { return small[rng() % 9]; };
  for (int64_t k : {32, 96, 128, 480, 512, 544, 1024, 1312}) {
    for (bool fp4 : {false, true}) {
      const Owned x = Make(3, k, 1, 128, rng, code);
      const Owned w = fp4 ? Make(5, k, 1, 32, rng, code) : Make(130, k, 128, 128, rng, code);
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j : {int64_t{0}, int64_t{4}, fp4 ? int64_t{2} : int64_t{129}})
          EXPECT_EQ(fm::Dot(x.op, i, w.op, j), static_cast<float>(Exact(x.op, i, w.op, j)))
              << "k " << k << (fp4 ? " fp4" : " fp8") << " row " << i << " col " << j;
    }
  }
}

// Random e4m3 operands: Dot stays within the truncations' bound of the exact sum (each k32 step
// loses under 2 * 2^(E - 13) per term, E its largest product's exponent), and does lose bits:
// a model with one fraction bit more or less gives other results.
TEST(Fp8MmaLinear, TruncatesAsTheInstruction) {
  std::mt19937 rng(40);
  auto code = [&] {
    for (;;) {
      const uint8_t b = static_cast<uint8_t>(rng() & 0xff);
      if ((b & 0x7f) != 0x7f && (b & 0x78) != 0x78) return b;  // no NaN, |x| < 256
    }
  };
  const int64_t k = 1024;
  const Owned x = Make(4, k, 1, 128, rng, code), w = Make(128, k, 128, 128, rng, code);
  fm::WgmmaFp8Model f12, f14;
  f12.fraction_bits = 12;
  f14.fraction_bits = 14;
  int inexact = 0, differs = 0;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 128; j += 3) {
      const float got = fm::Dot(x.op, i, w.op, j);
      double abs_sum = 0.0;
      for (int64_t c = 0; c < k; ++c)
        abs_sum += std::fabs(static_cast<double>(qc::E4m3ToFloat(x.op.Row(i)[c])) *
                             qc::E4m3ToFloat(w.op.Row(j)[c])) *
                   x.op.Scale(i, c) * w.op.Scale(j, c);
      const double exact = Exact(x.op, i, w.op, j);
      EXPECT_LE(std::fabs(got - exact), abs_sum * 0x1p-9) << i << " " << j;
      inexact += static_cast<double>(got) != exact;
      differs += fm::Dot(x.op, i, w.op, j, f12) != got || fm::Dot(x.op, i, w.op, j, f14) != got;
    }
  }
  EXPECT_GT(inexact, 100);
  EXPECT_GT(differs, 100);
}

// Fp8MmaGemm is Dot element by element, whatever m (a row alone or in a batch) and the threads.
TEST(Fp8MmaLinear, GemmIsDotAndBatchInvariant) {
  std::mt19937 rng(41);
  auto code = [&] { return static_cast<uint8_t>(rng() % 0x70 | (rng() & 0x80)); };
  ThreadPool pool(3);
  for (bool fp4 : {false, true}) {
    const int64_t m = 6, n = 133, k = 640;
    const Owned x = Make(m, k, 1, 128, rng, code);
    const Owned w = fp4 ? Make(n, k, 1, 32, rng, code) : Make(n, k, 128, 128, rng, code);
    std::vector<float> y(m * n), y1(m * n), row(n);
    cpu::Fp8MmaGemm(x.op, m, w.op, n, y.data(), n, &pool);
    cpu::Fp8MmaGemm(x.op, m, w.op, n, y1.data(), n, nullptr);
    EXPECT_EQ(y, y1);
    for (int64_t i = 0; i < m; ++i) {
      fm::Operand one = x.op;
      one.e4m3 = x.op.Row(i);
      one.scale = x.scales.data() + i * ((k + 127) / 128);
      cpu::Fp8MmaGemm(one, 1, w.op, n, row.data(), n, &pool);
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(row[j], y[i * n + j]) << i << " " << j;
        ASSERT_EQ(y[i * n + j], fm::Dot(x.op, i, w.op, j)) << i << " " << j;
      }
    }
  }
}

// The mode's Gemm (a WeightView with codes from a checkpoint tensor, io::QuantizedToMma) against
// the exact products' Gemm on the same weights dequantized (act_quant on both): within the
// instructions' truncation, for FP8 (a last partial 128-column block) and FP4.
TEST(Fp8MmaLinear, ModeGemmIsTheExactGemmWithinTheTruncation) {
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 3, n = 96, k = 352;
  for (bool fp4 : {false, true}) {
    std::vector<float> w(n * k), x(m * k);
    for (float& v : w) v = normal(rng) * 0.02f;
    for (float& v : x) v = normal(rng);
    const io::QuantizedTensor q =
        fp4 ? io::QuantizeFp4(w, n, k) : io::QuantizeFp8Blocks(w, n, k, 128);
    io::TensorView wv{"w", fp4 ? DType::kU8 : DType::kF8E4M3, q.data_shape, q.data.data(),
                      q.data.size()};
    io::TensorView sv{"s", DType::kF8E8M0, q.scale_shape, q.scale.data(), q.scale.size()};
    auto deq = io::DequantizeToF32(wv, &sv, {n, k}, 128);
    auto mma = io::QuantizedToMma(wv, &sv, {n, k}, 128);
    ASSERT_TRUE(deq.ok() && mma.ok()) << mma.status().ToString();
    ASSERT_EQ(mma->bc, 128);  // (FP4 re-expressed per 128-column block)
    cpu::WeightView exact(deq->data());
    exact.act_quant = true;
    cpu::WeightView mode = exact;
    mode.mma = {mma->e4m3.data(), mma->scale.data(), k, 1, mma->bc};
    std::vector<float> y0(m * n), y1(m * n);
    cpu::Gemm(x.data(), m, k, k, exact, n, y0.data(), n, nullptr);
    cpu::Gemm(x.data(), m, k, k, mode, n, y1.data(), n, nullptr);
    double rms = 0.0;
    for (float v : y0) rms += static_cast<double>(v) * v;
    rms = std::sqrt(rms / y0.size());
    int differ = 0;
    for (size_t i = 0; i < y0.size(); ++i) {
      EXPECT_LE(std::fabs(y1[i] - y0[i]), 2e-3 * rms) << (fp4 ? "fp4 " : "fp8 ") << i;
      differ += y1[i] != y0[i];
    }
    EXPECT_GT(differ, 0);
  }
}

// ActQuantCodes holds ActQuantRow's values as codes and scales, bit for bit.
// FP4 in the mode: per row and 128-column block one scale, 2^(e_max - 127) of the block's four
// group bytes, and each code its value times 2^(e_group - e_max) as e4m3: the dequantized value
// exactly while the groups span at most 8 binades, the nearest e4m3 code beyond (a span of 13 and
// more: zeros, signed). The blocks here span 0 to 15 binades (k = 352: a last block of 3 groups).
TEST(Fp8MmaLinear, Fp4ReexpressedPerBlock) {
  std::mt19937 rng(45);
  const int64_t n = 16, k = 352, groups = k / 32;
  std::vector<uint8_t> codes(n * k / 2), bytes(n * groups);
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g)  // row r's blocks span up to r binades
      bytes[r * groups + g] = static_cast<uint8_t>(120 - (g % 4 == 1 ? r : rng() % (r / 2 + 1)));
  io::TensorView wv{"w", DType::kU8, {n, k / 2}, codes.data(), codes.size()};
  io::TensorView sv{"s", DType::kF8E8M0, {n, groups}, bytes.data(), bytes.size()};
  auto deq = io::DequantizeToF32(wv, &sv, {n, k}, 128);
  auto mma = io::QuantizedToMma(wv, &sv, {n, k}, 128);
  ASSERT_TRUE(deq.ok() && mma.ok()) << mma.status().ToString();
  ASSERT_EQ(mma->bc, 128);
  const int64_t nb = (k + 127) / 128;
  int inexact = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t* g = &bytes[r * groups];
      const int64_t g0 = (c / 128) * 4, g1 = std::min(groups, g0 + 4);
      const uint8_t e_max = *std::max_element(g + g0, g + g1);
      const float scale = mma->scale[r * nb + c / 128];
      ASSERT_EQ(scale, std::ldexp(1.0f, e_max - 127)) << r << " " << c;
      const int d = e_max - g[c / 32];
      const uint8_t nib = (codes[(r * k + c) / 2] >> (4 * (c % 2))) & 15;
      const uint8_t got = mma->e4m3[r * k + c];
      ASSERT_EQ(got, E2M1ToE4M3Shifted(nib, d)) << r << " " << c;
      ASSERT_EQ(got, FloatToE4M3(std::ldexp(E2M1ToFloat(nib), -d))) << r << " " << c;
      const float value = E4M3ToFloat(got) * scale, want = (*deq)[r * k + c];
      if (d <= 8) {
        ASSERT_EQ(value, want) << r << " " << c << " span " << d;
      } else {
        inexact += value != want;
        if (d >= 13) {
          ASSERT_EQ(got & 0x7f, 0) << r << " " << c;
        }
      }
    }
  EXPECT_GT(inexact, 0);                        // (the test reaches the inexact spans)
  EXPECT_EQ(E2M1ToE4M3Shifted(0x9, 0), 0xb0);   // -0.5
  EXPECT_EQ(E2M1ToE4M3Shifted(0x9, 9), 0x80);   // -0.5 * 2^-9 = -2^-10: a tie, to -0
  EXPECT_EQ(E2M1ToE4M3Shifted(0x7, 12), 0x01);  // 6 * 2^-12 = 0.75 of the least subnormal
  EXPECT_EQ(E2M1ToE4M3Shifted(0x7, 13), 0x00);
}

TEST(Fp8MmaLinear, ActQuantCodesAreActQuantRow) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t k : {1, 127, 128, 300, 1024}) {
    std::vector<float> x(k), out(k), scales((k + 127) / 128);
    std::vector<uint8_t> codes(k);
    for (int64_t i = 0; i < k; ++i)
      x[i] = normal(rng) * (i % 97 == 5 ? 1e3f : 1.0f) * (i % 7 ? 1 : 0);
    cpu::ActQuantRow(x.data(), k, out.data());
    cpu::ActQuantCodes(x.data(), k, codes.data(), scales.data());
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(E4M3ToFloat(codes[i]) * scales[i / 128], out[i]) << "k " << k << " at " << i;
  }
}

}  // namespace
}  // namespace dsinfer::backend
