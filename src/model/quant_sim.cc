#include "model/quant_sim.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"

namespace dsinfer::model {

namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;
constexpr float kE2m1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The exponent k of Pow2CeilScale(v) as a byte k + 127 (k in [-127, 128] for finite or infinite
// v; 2^(b - 127) gives the scale back exactly).
uint8_t Pow2ScaleByte(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 23) & 0xFF);
  const int k = exponent - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return static_cast<uint8_t>(std::clamp(k + 127, 0, 255));
}

float Pow2ScaleOf(uint8_t b) { return std::ldexp(1.0f, static_cast<int>(b) - 127); }

// The e2m1 code of a value already clamped to [-6, 6]: bit 3 the sign, bits 0-2 the index into
// kE2m1Values (the reference's rounding; zero has no sign).
uint8_t E2m1Code(float v) {
  const float m = std::fabs(v);
  uint8_t code = 0;
  code += m > 0.25f;
  code += m >= 0.75f;
  code += m > 1.25f;
  code += m >= 1.75f;
  code += m > 2.5f;
  code += m >= 3.5f;
  code += m > 5.0f;
  return code != 0 && std::signbit(v) ? static_cast<uint8_t>(code | 8) : code;
}

float E2m1Value(uint8_t code) {
  const float m = kE2m1Values[code & 7];
  return (code & 7) != 0 && (code & 8) != 0 ? -m : m;
}

float Amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// One block of `block` values: its scale byte and value codes (e4m3 bytes or e2m1 codes), and the
// fake-quantized values written back to x.
uint8_t QuantizeBlock(KvQuant quant, float* x, int64_t block, uint8_t* codes) {
  const float amax = Amax(x, block);
  uint8_t scale_byte = 0;
  float s = 0.0f;
  switch (quant) {
    case KvQuant::kNone:  // never packed
      return 0;
    case KvQuant::kFp8Pow2:
    case KvQuant::kFp8BfTail:
      scale_byte = Pow2ScaleByte(std::max(amax, 1e-4f) * (1.0f / kFp8Max));
      s = Pow2ScaleOf(scale_byte);
      for (int64_t i = 0; i < block; ++i) {
        codes[i] = FloatToE4M3(std::clamp(x[i] / s, -kFp8Max, kFp8Max));
        x[i] = E4M3ToFloat(codes[i]) * s;
      }
      return scale_byte;
    case KvQuant::kFp4E4m3:
      scale_byte = FloatToE4M3(std::max(amax, 6.0f * 0x1p-9f) / kFp4Max);
      s = E4M3ToFloat(scale_byte);
      break;
    case KvQuant::kFp4Pow2:
      scale_byte = Pow2ScaleByte(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / kFp4Max));
      s = Pow2ScaleOf(scale_byte);
      break;
  }
  for (int64_t i = 0; i < block; ++i) {
    codes[i] = E2m1Code(std::clamp(x[i] / s, -kFp4Max, kFp4Max));
    x[i] = E2m1Value(codes[i]) * s;
  }
  return scale_byte;
}

bool IsFp8(KvQuant quant) { return quant == KvQuant::kFp8Pow2 || quant == KvQuant::kFp8BfTail; }

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

float Pow2CeilScale(float v) { return Pow2ScaleOf(Pow2ScaleByte(v)); }

float RoundE2m1(float v) { return E2m1Value(E2m1Code(v)); }

void Fp8BlockSim(float* x, int64_t n, int64_t block) {
  if (n % block != 0) return;
  std::vector<uint8_t> codes(static_cast<size_t>(block));
  for (int64_t b = 0; b < n; b += block)
    QuantizeBlock(KvQuant::kFp8Pow2, x + b, block, codes.data());
}

void Fp4BlockSim(float* x, int64_t n, int64_t block, bool e4m3_scales) {
  if (n % block != 0) return;
  std::vector<uint8_t> codes(static_cast<size_t>(block));
  const KvQuant quant = e4m3_scales ? KvQuant::kFp4E4m3 : KvQuant::kFp4Pow2;
  for (int64_t b = 0; b < n; b += block) QuantizeBlock(quant, x + b, block, codes.data());
}

void HadamardRotate(float* x, int64_t n) {
  if (!IsPowerOfTwo(n)) return;
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

KvFormat::KvFormat(KvQuant quant, int64_t n, int64_t block, int64_t tail)
    : quant_(quant),
      n_(n),
      block_(block),
      tail_(quant == KvQuant::kFp8BfTail ? tail : 0),
      packed_(quant != KvQuant::kNone && block > 0 && n - tail_ > 0 && (n - tail_) % block == 0) {}

int64_t KvFormat::row_floats() const {
  if (!packed_) return n_;
  const int64_t q = quantized();
  const int64_t bytes = (IsFp8(quant_) ? q : q / 2) + q / block_ + 2 * tail_;
  return (bytes + static_cast<int64_t>(sizeof(float)) - 1) / static_cast<int64_t>(sizeof(float));
}

void KvFormat::Pack(float* x, float* row) const {
  const int64_t q = quantized();
  for (int64_t i = q; i < n_; ++i) x[i] = RoundToBf16(x[i]);  // kFp8BfTail's tail (else none)
  if (!packed_) {
    std::copy_n(x, n_, row);
    return;
  }
  auto* out = reinterpret_cast<uint8_t*>(row);
  std::memset(out, 0, static_cast<size_t>(row_floats()) * sizeof(float));
  const bool fp8 = IsFp8(quant_);
  uint8_t* scales = out + (fp8 ? q : q / 2);
  uint8_t* tail = scales + q / block_;
  for (int64_t i = 0; i < tail_; ++i) {
    const uint16_t bits = FloatToBf16(x[q + i]);
    std::memcpy(tail + 2 * i, &bits, sizeof(bits));
  }
  std::vector<uint8_t> codes(static_cast<size_t>(block_));
  for (int64_t b = 0; b < q; b += block_) {
    scales[b / block_] = QuantizeBlock(quant_, x + b, block_, codes.data());
    for (int64_t i = 0; i < block_; ++i) {
      const int64_t e = b + i;
      if (fp8) {
        out[e] = codes[i];
      } else {
        out[e / 2] |= static_cast<uint8_t>(e % 2 == 0 ? codes[i] : codes[i] << 4);
      }
    }
  }
}

void KvFormat::Unpack(const float* row, float* x) const {
  if (!packed_) {
    std::copy_n(row, n_, x);
    return;
  }
  const auto* in = reinterpret_cast<const uint8_t*>(row);
  const bool fp8 = IsFp8(quant_);
  const int64_t q = quantized();
  const uint8_t* scales = in + (fp8 ? q : q / 2);
  const uint8_t* tail = scales + q / block_;
  for (int64_t i = 0; i < tail_; ++i) {
    uint16_t bits;
    std::memcpy(&bits, tail + 2 * i, sizeof(bits));
    x[q + i] = Bf16ToFloat(bits);
  }
  for (int64_t b = 0; b < q; b += block_) {
    const uint8_t sb = scales[b / block_];
    const float s = quant_ == KvQuant::kFp4E4m3 ? E4M3ToFloat(sb) : Pow2ScaleOf(sb);
    for (int64_t e = b; e < b + block_; ++e) {
      if (fp8) {
        x[e] = E4M3ToFloat(in[e]) * s;
      } else {
        const uint8_t nib = e % 2 == 0 ? (in[e / 2] & 0xF) : (in[e / 2] >> 4);
        x[e] = E2m1Value(nib) * s;
      }
    }
  }
}

}  // namespace dsinfer::model
