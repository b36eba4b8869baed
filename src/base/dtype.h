// Element types of checkpoint tensors and the scalar conversions between them and fp32.
// All conversions are exact where the target can represent the value; fp32 -> narrow formats round to
// nearest even and saturate (e4m3 at ±448, e2m1 at ±6), as the official quantizers do (spec §2.12).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace dsinfer {

enum class DType {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,   // float8_e4m3fn: no inf, max 448
  kF8E8M0,   // ue8m0 scale byte: 2^(b-127)
  kI64,
  kI32,
  kI8,       // also packed FP4 (two e2m1 codes per byte, low nibble first)
  kU8,
};

// Bytes per element (packed FP4 is stored as I8/U8 and sized as such).
size_t DTypeSize(DType dtype);
// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view DTypeName(DType dtype);
std::optional<DType> DTypeFromName(std::string_view name);

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float Bf16ToFloat(uint16_t v) { return BitsToFloat(static_cast<uint32_t>(v) << 16); }
// Round to nearest even; NaN stays NaN.
uint16_t FloatToBf16(float f);
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

float F16ToFloat(uint16_t v);
uint16_t FloatToF16(float f);

float E4M3ToFloat(uint8_t v);
// Saturating round-to-nearest-even to e4m3fn (|x| > 448 -> ±448; NaN -> 0x7f).
uint8_t FloatToE4M3(float f);

// ue8m0: 2^(b-127); 255 is NaN.
float E8M0ToFloat(uint8_t v);
// The ue8m0 exponent byte of 2^ceil(log2(max(amax, amax_floor) / qmax)), by exponent bits as the
// official kernels' fast_log2_ceil (spec §2.12): weight quantizers and activation quantization.
uint8_t Ue8m0ScaleFor(float amax, float qmax, float amax_floor);

// e2m1 code (bit 3 = sign) -> value in {0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6}.
float E2M1ToFloat(uint8_t code);
// An e2m1 code's value times 2^-d (d >= 0) as the nearest e4m3 code (FloatToE4M3: ties to even,
// subnormals; a negative value that rounds to zero keeps its sign, 0x80): exact for d <= 8, zero
// from d = 13 on. The FP8-instruction mode's FP4 operand (io::QuantizedToMma).
uint8_t E2M1ToE4M3Shifted(uint8_t code, int d);
// Round-to-nearest-even onto the e2m1 grid with saturation at ±6.
uint8_t FloatToE2M1(float f);

}  // namespace dsinfer
