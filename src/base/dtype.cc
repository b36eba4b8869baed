#include "base/dtype.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace dsinfer {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kF8E8M0: return 1;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E8M0: return "F8_E8M0";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
  }
  return "?";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  static constexpr std::array<DType, 9> kAll = {DType::kF32,    DType::kF16,    DType::kBF16,
                                                DType::kF8E4M3, DType::kF8E8M0, DType::kI64,
                                                DType::kI32,    DType::kI8,     DType::kU8};
  for (DType d : kAll) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits = FloatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float F16ToFloat(uint16_t v) {
  uint32_t sign = (v >> 15) & 1u, exp = (v >> 10) & 0x1fu, mant = v & 0x3ffu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    mag = mant ? NAN : INFINITY;
  } else {
    mag = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -mag : mag;
}

uint16_t FloatToF16(float f) {
  uint32_t bits = FloatToBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to inf
  if (a < std::ldexp(1.0f, -14)) {           // subnormal: units of 2^-24
    float q = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(q);
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 11 significant bits: mantissa units of 2^(e-11)
  float q = std::nearbyint(std::ldexp(m, 11));
  if (q >= 2048.0f) {
    q /= 2;
    e += 1;
  }
  uint32_t exp16 = static_cast<uint32_t>(e - 1 + 15);
  if (exp16 >= 31) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>((exp16 << 10) | (static_cast<uint32_t>(q) & 0x3ffu));
}

float E4M3ToFloat(uint8_t v) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) {
      const uint32_t sign = c >> 7, exp = (c >> 3) & 0xfu, mant = c & 7u;
      float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                           : std::ldexp(static_cast<float>(mant | 8u), static_cast<int>(exp) - 10);
      if (exp == 15 && mant == 7) mag = NAN;
      t[c] = sign ? -mag : mag;
    }
    return t;
  }();
  return table[v];
}

uint8_t FloatToE4M3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::min(std::fabs(f), 448.0f);  // saturate (448 = 0x7e)
  if (a < 0.015625f) {  // below 2^-6: subnormals, units of 2^-9 (8 units = 2^-6 = exp 1, mant 0)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Round the fp32 mantissa to 3 bits, ties to even; a carry moves into the exponent.
  uint32_t bits = FloatToBits(a);
  bits += 0x7FFFFu + ((bits >> 20) & 1u);
  const int exp8 = static_cast<int>(bits >> 23) - 127 + 7;  // 1..15 for 2^-6 <= a <= 448
  return sign | static_cast<uint8_t>((exp8 << 3) | ((bits >> 20) & 7u));
}

float E8M0ToFloat(uint8_t v) {
  if (v == 255) return NAN;
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

uint8_t Ue8m0ScaleFor(float amax, float qmax, float amax_floor) {
  amax = std::max(amax, amax_floor);
  const uint32_t bits = FloatToBits(amax / qmax);
  const int e = static_cast<int>((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) != 0 ? 1 : 0);
  return static_cast<uint8_t>(std::clamp(e + 127, 0, 254));
}

float E2M1ToFloat(uint8_t code) {
  static constexpr float kTable[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kTable[code & 0xf];
}

uint8_t E2M1ToE4M3Shifted(uint8_t code, int d) {
  return FloatToE4M3(std::ldexp(E2M1ToFloat(code), -std::clamp(d, 0, 64)));
}

uint8_t FloatToE2M1(float f) {
  // Round to nearest on the grid {0, .5, 1, 1.5, 2, 3, 4, 6}, ties to the even code, saturating:
  // the code is the number of midpoints below |f| (a tie counts when the upper code is even).
  // NaN compares false everywhere: code 0 with its sign.
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                   (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(sign | code);
}

}  // namespace dsinfer
