// backend/wgmma_fp8.h's model against the H200's wgmma .e4m3 outputs it was fitted to
// (tests/data/wgmma_fp8_h200_s31.json), and the model's own invariants.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/wgmma_fp8.h"

namespace {

using dsinfer::backend::fp8mma::WgmmaFp8Model;

double DecodeE4m3(uint8_t b) { return dsinfer::backend::qc::E4m3ToFloat(b); }

struct Case {
  std::string name;
  int steps = 0;
  std::vector<uint8_t> a;
  std::vector<std::vector<uint8_t>> b;
  std::vector<double> exact;
  std::vector<float> wgmma;
};

std::vector<uint8_t> Codes(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<Case> LoadCases() {
  std::ifstream in(std::string(DSINFER_SOURCE_DIR) + "/tests/data/wgmma_fp8_h200_s31.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(ss.str(), nullptr, false);
  std::vector<Case> cases;
  if (doc.is_discarded()) return cases;
  for (const auto& c : doc["cases"]) {
    Case k;
    k.steps = c["steps"].get<int>();
    k.name = c["class"].get<std::string>() + " x" + std::to_string(k.steps);
    k.a = Codes(c["a"].get<std::string>());
    for (const auto& b : c["b"]) k.b.push_back(Codes(b.get<std::string>()));
    for (const auto& e : c["exact"])
      k.exact.push_back(std::strtod(e.get<std::string>().c_str(), nullptr));
    for (const auto& w : c["wgmma"])
      k.wgmma.push_back(std::strtof(w.get<std::string>().c_str(), nullptr));
    cases.push_back(std::move(k));
  }
  return cases;
}

// How many of the H200's elements a model reproduces bit for bit (of `total`).
int Matches(const std::vector<Case>& cases, const WgmmaFp8Model& model, int* total) {
  int ok = 0;
  *total = 0;
  for (const Case& c : cases) {
    for (size_t n = 0; n < c.b.size(); ++n) {
      ++*total;
      const float got = model.Chain(c.a.data(), c.b[n].data(), 32 * c.steps);
      ok += got == c.wgmma[n] && std::signbit(got) == std::signbit(c.wgmma[n]);
    }
  }
  return ok;
}

TEST(WgmmaFp8Model, DataAreTheOperandsTheH200Saw) {
  // The codes were regenerated from the probe's seeds: their exact dot products must be the ones
  // the H200 run printed next to its outputs.
  const std::vector<Case> cases = LoadCases();
  ASSERT_EQ(cases.size(), 9u);
  for (const Case& c : cases) {
    ASSERT_EQ(c.a.size(), 32u * c.steps) << c.name;
    ASSERT_EQ(c.b.size(), 3u) << c.name;
    for (size_t n = 0; n < c.b.size(); ++n) {
      ASSERT_EQ(c.b[n].size(), c.a.size()) << c.name;
      double exact = 0.0;  // e4m3 products and their sums are exact in a double
      for (size_t k = 0; k < c.a.size(); ++k) exact += DecodeE4m3(c.a[k]) * DecodeE4m3(c.b[n][k]);
      EXPECT_EQ(exact, c.exact[n]) << c.name << " column " << n;
    }
  }
}

TEST(WgmmaFp8Model, ReproducesEveryH200Element) {
  const std::vector<Case> cases = LoadCases();
  int total = 0;
  EXPECT_EQ(Matches(cases, WgmmaFp8Model{}, &total), 27);
  EXPECT_EQ(total, 27);
  // The variants the data cannot tell apart.
  WgmmaFp8Model own;
  own.cut_at_own_lead = true;
  EXPECT_EQ(Matches(cases, own, &total), 27);
  WgmmaFp8Model sub;
  sub.subnormal_true_exponent = true;
  EXPECT_EQ(Matches(cases, sub, &total), 27);
}

TEST(WgmmaFp8Model, OneBitMoreOrLessMisses) {
  // The data pin the precision: 12 or 14 fraction bits reproduce a minority of the elements.
  const std::vector<Case> cases = LoadCases();
  int total = 0;
  for (int bits : {12, 14}) {
    WgmmaFp8Model m;
    m.fraction_bits = bits;
    EXPECT_LT(Matches(cases, m, &total), 10) << bits << " bits";
  }
}

TEST(WgmmaFp8Model, ExactWhenEverySumFits) {
  // Small integers: every product and partial sum is a multiple of the grid, so each step is the
  // exact sum, whatever the chain.
  std::mt19937 rng(7);
  std::vector<uint8_t> small;
  for (int b = 0; b < 256; ++b) {
    const double v = DecodeE4m3(static_cast<uint8_t>(b));
    if ((b & 0x7f) != 0x7f && v == std::trunc(v) && std::fabs(v) <= 4.0) small.push_back(b);
  }
  ASSERT_FALSE(small.empty());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> a(128), b(128);
    for (auto& x : a) x = small[rng() % small.size()];
    for (auto& x : b) x = small[rng() % small.size()];
    double exact = 0.0;
    for (int k = 0; k < 128; ++k) exact += DecodeE4m3(a[k]) * DecodeE4m3(b[k]);
    EXPECT_EQ(WgmmaFp8Model{}.Chain(a.data(), b.data(), 128), static_cast<float>(exact));
  }
}

TEST(WgmmaFp8Model, CutsTowardZeroBelowTheLargestTerm) {
  // 448 * 448 = 200704: E = 8 + 8 (the operands' exponents, not the product's 17), so the grid is
  // 2^(16 - 13) = 8 and a product of 1 * 2^-9 next to it vanishes.
  std::vector<uint8_t> a(32, 0), b(32, 0);
  a[0] = b[0] = 0x7e;  // 448
  a[1] = 0x38;         // 1
  b[1] = 0x01;         // 2^-9 (subnormal)
  EXPECT_EQ(WgmmaFp8Model{}.Step(a.data(), b.data(), 0.0f), 200704.0f);
  // -1 next to it: cut toward zero, -1 becomes 0 on a grid of 8.
  b[1] = 0xb8;  // -1
  EXPECT_EQ(WgmmaFp8Model{}.Step(a.data(), b.data(), 0.0f), 200704.0f);
  // The accumulator is aligned like a product: c = 1 vanishes too.
  b[1] = 0;
  EXPECT_EQ(WgmmaFp8Model{}.Step(a.data(), b.data(), 1.0f), 200704.0f);
  // A lone accumulator passes through a step of zeros unchanged when it fits 14 bits.
  std::vector<uint8_t> z(32, 0);
  EXPECT_EQ(WgmmaFp8Model{}.Step(z.data(), z.data(), 1.5f), 1.5f);
}

}  // namespace
