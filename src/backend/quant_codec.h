// The FP8 / FP4 / bf16 codecs of DeepSeek's quantization simulation and FP8 cache (spec §2.12):
// the block scales, the e4m3 / e2m1 codes and their values, and the packed row layout of the
// FP8 cache (fp8_ds_mla: e4m3 values, one scale byte per block, a bf16 tail; index keys: e2m1
// nibbles, one scale byte per block). Shared by the CPU reference (model/quant_sim) and the CUDA
// kernels (backend/cuda/fake_quant.cuh), so that both round, encode and decode alike by
// construction. Header-only, no CUDA headers; pure functions of their arguments; every product
// and quotient rounds once (Mul / Div: the device's __fmul_rn / __fdiv_rn, so neither
// contraction nor a fast division can change a bit there).
//
//   kFp8Pow2  s = Pow2Ceil(max(amax, 1e-4) * (1/448)),   code = e4m3_rne(clamp(x / s, +-448))
//   kFp4E4m3  s = e4m3_rne(max(amax, 6 * 2^-9) / 6),      code = e2m1(clamp(x / s, +-6))
//   kFp4Pow2  s = Pow2Ceil(max(amax, 6 * 2^-126) * (1/6)), code = e2m1(clamp(x / s, +-6))
//   value = ValueOfCode(code) * s
// Pow2Ceil(v) = 2^(exponent(v) - 127 + (mantissa(v) != 0)) by the bits, stored as that exponent
// + 127 clamped to [0, 255]; e4m3_rne is base/dtype's FloatToE4M3 (saturating at 448, subnormals
// in units of 2^-9, NaN -> 0x7f); e2m1 rounds to the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6, ties
// to the even code (0.25, 1.25, 2.5, 5 down; 0.75, 1.75, 3.5 up), zero without a sign.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/float_bits.h"

#if defined(__CUDACC__)
#define DSINFER_QC_FN __host__ __device__ __forceinline__
#else
#define DSINFER_QC_FN inline
#endif

namespace dsinfer::backend::qc {

enum class Kind : uint8_t { kFp8Pow2, kFp4E4m3, kFp4Pow2 };

DSINFER_QC_FN uint32_t Bits(float v) { return FloatToBits32(v); }
DSINFER_QC_FN float FromBits(uint32_t b) { return Bits32ToFloat(b); }
// One rounding each.
DSINFER_QC_FN float Mul(float a, float b) { return MulRn(a, b); }
DSINFER_QC_FN float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
// std::clamp(v, lo, hi) (NaN stays NaN); std::max(a, b) (a NaN a gives b).
DSINFER_QC_FN float Clamp(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }
DSINFER_QC_FN float Max(float a, float b) { return a < b ? b : a; }

// The byte k + 127 of Pow2Ceil(v) = 2^k (v > 0), clamped to [0, 255].
DSINFER_QC_FN uint8_t Pow2ScaleByte(float v) {
  const uint32_t bits = Bits(v);
  const int k = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return static_cast<uint8_t>(k + 127 < 0 ? 0 : (k + 127 > 255 ? 255 : k + 127));
}
// 2^(b - 127) exactly (b = 0: the subnormal 2^-127; b = 255: +inf).
DSINFER_QC_FN float Pow2OfByte(uint8_t b) {
  if (b == 0) return FromBits(0x00400000u);
  if (b == 255) return FromBits(0x7f800000u);
  return FromBits(static_cast<uint32_t>(b) << 23);
}

// base/dtype's FloatToE4M3 and E4M3ToFloat.
DSINFER_QC_FN uint8_t FloatToE4m3(float f) {
  if (f != f) return 0x7f;
  const uint32_t fb = Bits(f);
  const uint8_t sign = (fb >> 31) != 0 ? 0x80 : 0;
  const float mag = FromBits(fb & 0x7fffffffu);
  const float a = mag < 448.0f ? mag : 448.0f;
  if (a < 0.015625f) {  // subnormals, units of 2^-9 (rounded to nearest even)
#if defined(__CUDA_ARCH__)
    return sign | static_cast<uint8_t>(rintf(Mul(a, 512.0f)));
#else
    return sign | static_cast<uint8_t>(std::nearbyint(Mul(a, 512.0f)));
#endif
  }
  uint32_t bits = Bits(a);
  bits += 0x7FFFFu + ((bits >> 20) & 1u);
  const int exp8 = static_cast<int>(bits >> 23) - 127 + 7;
  return sign | static_cast<uint8_t>((exp8 << 3) | ((bits >> 20) & 7u));
}
DSINFER_QC_FN float E4m3ToFloat(uint8_t v) {
  const uint32_t exp = (v >> 3) & 0xfu, mant = v & 7u;
  float mag;
  if (exp == 0) {
    mag = Mul(static_cast<float>(mant), 0.001953125f);  // mant * 2^-9
  } else if (exp == 15 && mant == 7) {
    mag = FromBits(0x7fc00000u);
  } else {  // (8 + mant) * 2^(exp - 10)
    mag = Mul(static_cast<float>(mant | 8u), FromBits((exp - 10 + 127) << 23));
  }
  return (v & 0x80) != 0 ? -mag : mag;
}

// The e2m1 code of a value already clamped to [-6, 6] (bit 3 the sign, bits 0-2 the index of
// 0, 0.5, 1, 1.5, 2, 3, 4, 6), and a code's value.
DSINFER_QC_FN uint8_t E2m1Code(float v) {
  const float m = FromBits(Bits(v) & 0x7fffffffu);
  int code = 0;
  code += m > 0.25f;
  code += m >= 0.75f;
  code += m > 1.25f;
  code += m >= 1.75f;
  code += m > 2.5f;
  code += m >= 3.5f;
  code += m > 5.0f;
  return static_cast<uint8_t>(code != 0 && (Bits(v) >> 31) != 0 ? code | 8 : code);
}
DSINFER_QC_FN float E2m1Value(uint8_t code) {
  const int c = code & 7;
  const float m =
      c <= 4 ? Mul(0.5f, static_cast<float>(c)) : (c == 5 ? 3.0f : (c == 6 ? 4.0f : 6.0f));
  return c != 0 && (code & 8) != 0 ? -m : m;
}

// base/dtype's FloatToBf16 (to nearest even; NaN quieted) and Bf16ToFloat.
DSINFER_QC_FN uint16_t FloatToBf16(float f) {
  const uint32_t bits = Bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
DSINFER_QC_FN float Bf16ToFloat(uint16_t v) { return FromBits(static_cast<uint32_t>(v) << 16); }

// A code byte's two e2m1 values (the low nibble's first) as a bf16 pair at scale 1, the first in
// the low half: the table by which the GPU indexer decodes FP4 index keys, each entry multiplied by
// the pair (s, s) of the block's power-of-two scale s = Pow2OfByte(b) in bf16 (bits b << 7). For b
// in [kE2m1PairExactLo, kE2m1PairExactHi] every such product (0, or |value| in [2^-1, 6] times s)
// is 0 or a normal bf16 value, so exact: the bf16 rounding of Mul(E2m1Value(code), s).
inline constexpr uint32_t kE2m1PairExactLo = 2, kE2m1PairExactHi = 252;
DSINFER_QC_FN uint32_t E2m1PairBf16(uint32_t byte) {
  return static_cast<uint32_t>(FloatToBf16(E2m1Value(static_cast<uint8_t>(byte & 0xFu)))) |
         static_cast<uint32_t>(FloatToBf16(E2m1Value(static_cast<uint8_t>((byte >> 4) & 0xFu))))
             << 16;
}

// A block's stored scale byte from its absolute maximum (>= 0), and the scale it stands for.
DSINFER_QC_FN uint8_t ScaleByte(Kind kind, float amax) {
  switch (kind) {
    case Kind::kFp8Pow2:
      return Pow2ScaleByte(Mul(Max(amax, 1e-4f), 1.0f / 448.0f));
    case Kind::kFp4E4m3:
      return FloatToE4m3(Div(Max(amax, 6.0f * 0x1p-9f), 6.0f));
    case Kind::kFp4Pow2:
      break;
  }
  return Pow2ScaleByte(Mul(Max(amax, 6.0f * 0x1p-126f), 1.0f / 6.0f));
}
DSINFER_QC_FN float ScaleOfByte(Kind kind, uint8_t b) {
  return kind == Kind::kFp4E4m3 ? E4m3ToFloat(b) : Pow2OfByte(b);
}
// A value's code in a block of scale s (an e4m3 byte, or an e2m1 code), and a code's value (before
// the scale: the value is ValueOfCode(code) * s, one rounding).
DSINFER_QC_FN uint8_t Code(Kind kind, float x, float s) {
  const float q = Div(x, s);
  return kind == Kind::kFp8Pow2 ? FloatToE4m3(Clamp(q, -448.0f, 448.0f))
                                : E2m1Code(Clamp(q, -6.0f, 6.0f));
}
DSINFER_QC_FN float ValueOfCode(Kind kind, uint8_t code) {
  return kind == Kind::kFp8Pow2 ? E4m3ToFloat(code) : E2m1Value(code);
}
// One value fake-quantized in a block of scale s.
DSINFER_QC_FN float Round(Kind kind, float x, float s) {
  return Mul(ValueOfCode(kind, Code(kind, x, s)), s);
}

// The packed row of n = q + tail values (the FP8 cache's rows; model/quant_sim.h's KvFormat):
// bytes [0, CodeBytes) the codes of the first q values (FP8: one byte each; FP4: two a byte, the
// even value in the low nibble), then `tail` bf16 values (2 bytes each, little-endian), then
// q / block scale bytes. Value i of a row decodes independently of the others. The codes and the
// tail come first so that a reader's 4-value groups stay 4-byte aligned (q % 4 == 0 codes, then
// 8 bytes per 4 tail values from an 8-byte multiple when q % 8 == 0). q == 0: not packed (fp32
// rows).
struct PackedRow {
  Kind kind = Kind::kFp8Pow2;
  int q = 0, block = 0, tail = 0;
  DSINFER_QC_FN bool packed() const { return q > 0; }
  DSINFER_QC_FN bool fp8() const { return kind == Kind::kFp8Pow2; }
  DSINFER_QC_FN int code_bytes() const { return fp8() ? q : q / 2; }
  DSINFER_QC_FN int tail_at() const { return code_bytes(); }
  DSINFER_QC_FN int scales_at() const { return code_bytes() + 2 * tail; }
  DSINFER_QC_FN int bytes() const { return packed() ? scales_at() + q / block : 0; }
  // Whole floats of memory per row (the bytes rounded up).
  DSINFER_QC_FN int floats() const { return (bytes() + 3) / 4; }
  // The code of value i < q.
  DSINFER_QC_FN uint8_t code(const uint8_t* row, int i) const {
    return fp8() ? row[i] : static_cast<uint8_t>((row[i / 2] >> (4 * (i % 2))) & 0xF);
  }
  // Value i (< q + tail).
  DSINFER_QC_FN float value(const uint8_t* row, int i) const {
    if (i >= q) {
      const int at = tail_at() + 2 * (i - q);
      return Bf16ToFloat(static_cast<uint16_t>(row[at] | (row[at + 1] << 8)));
    }
    return Mul(ValueOfCode(kind, code(row, i)), ScaleOfByte(kind, row[scales_at() + i / block]));
  }
};

}  // namespace dsinfer::backend::qc
