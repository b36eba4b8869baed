#include "io/quant.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace dsinfer::io {
namespace {

TensorView View(const std::string& name, DType dtype, std::vector<int64_t> shape,
                const std::vector<uint8_t>& bytes) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return v;
}

TEST(QuantTest, Fp8BlockDequantHandComputed) {
  // [2, 3] weight with block size 2: blocks (0,0) (0,1); scales 2^1 and 2^-2.
  std::vector<uint8_t> w = {0x38, 0x40, 0xb8, 0x30, 0x7e, 0x01};  // 1, 2, -1, 0.5, 448, 2^-9
  std::vector<uint8_t> s = {128, 125};
  auto wv = View("w", DType::kF8E4M3, {2, 3}, w);
  auto sv = View("s", DType::kF8E8M0, {1, 2}, s);
  auto out = DequantizeToF32(wv, &sv, {2, 3}, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<float> expect = {2, 4, -0.25f, 1, 896, std::ldexp(1.0f, -11)};
  EXPECT_EQ(*out, expect);
  // f32 scales are accepted too (V4-Flash-Base).
  std::vector<uint8_t> sf(8);
  float a = 2.0f, b = 0.25f;
  std::memcpy(sf.data(), &a, 4);
  std::memcpy(sf.data() + 4, &b, 4);
  auto sfv = View("s", DType::kF32, {1, 2}, sf);
  EXPECT_EQ(*DequantizeToF32(wv, &sfv, {2, 3}, 2), expect);
  // Missing or mis-shaped scales are errors.
  EXPECT_FALSE(DequantizeToF32(wv, nullptr, {2, 3}, 2).ok());
  auto bad = View("s", DType::kF8E8M0, {2, 2}, std::vector<uint8_t>(4, 127));
  EXPECT_FALSE(DequantizeToF32(wv, &bad, {2, 3}, 2).ok());
}

TEST(QuantTest, Fp4DequantHandComputed) {
  // One row of 64 logical columns: bytes hold (lo, hi) codes; two per-32 scales 2^0 and 2^3.
  std::vector<uint8_t> w(32, 0);
  w[0] = 0x72;   // col0 = code 2 (1.0), col1 = code 7 (6.0)
  w[16] = 0x9F;  // col32 = code 15 (-6), col33 = code 9 (-0.5)
  std::vector<uint8_t> s = {127, 130};
  auto wv = View("w", DType::kI8, {1, 32}, w);
  auto sv = View("s", DType::kF8E8M0, {1, 2}, s);
  auto out = DequantizeToF32(wv, &sv, {1, 64}, 128);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0], 1.0f);
  EXPECT_EQ((*out)[1], 6.0f);
  EXPECT_EQ((*out)[2], 0.0f);
  EXPECT_EQ((*out)[32], -48.0f);
  EXPECT_EQ((*out)[33], -4.0f);
}

TEST(QuantTest, ScaleIsPowerOfTwoCeil) {
  EXPECT_EQ(Ue8m0ScaleFor(448.0f, 448.0f, 1e-4f), 127);   // exactly 1
  EXPECT_EQ(Ue8m0ScaleFor(449.0f, 448.0f, 1e-4f), 128);   // just above -> 2
  EXPECT_EQ(Ue8m0ScaleFor(6.0f, 6.0f, 0.0f), 127);
  EXPECT_EQ(Ue8m0ScaleFor(3.0f, 6.0f, 0.0f), 126);
}

TEST(QuantTest, QuantizeDequantizeRoundTrip) {
  const int64_t out = 130, in = 256;
  auto w = testing::RandomVector(out * in, 3, 0.05f);
  auto q8 = QuantizeFp8Blocks(w, out, in, 128);
  auto s8 = View("s", DType::kF8E8M0, q8.scale_shape, q8.scale);
  auto d8 = DequantizeToF32(View("w", DType::kF8E4M3, q8.data_shape, q8.data), &s8, {out, in}, 128);
  ASSERT_TRUE(d8.ok());
  EXPECT_LT(testing::RelativeError(*d8, w), 0.07);  // e4m3: 3 mantissa bits
  auto q4 = QuantizeFp4(w, out, in);
  auto s4 = View("s", DType::kF8E8M0, q4.scale_shape, q4.scale);
  auto d4 = DequantizeToF32(View("w", DType::kI8, q4.data_shape, q4.data), &s4, {out, in}, 128);
  ASSERT_TRUE(d4.ok());
  EXPECT_LT(testing::RelativeError(*d4, w), 0.35);
  // Re-quantizing dequantized values is exact (the grid is closed).
  auto q8b = QuantizeFp8Blocks(*d8, out, in, 128);
  EXPECT_EQ(q8b.data, q8.data);
  EXPECT_EQ(q8b.scale, q8.scale);
}

}  // namespace
}  // namespace dsinfer::io
