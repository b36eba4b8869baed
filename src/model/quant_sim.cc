#include "model/quant_sim.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/quant_codec.h"
#include "base/dtype.h"

namespace dsinfer::model {

namespace {

namespace qc = backend::qc;

float Amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// The codec's kind of a packed KvQuant (kFp8BfTail's blocks are kFp8Pow2's).
qc::Kind CodecKind(KvQuant quant) {
  switch (quant) {
    case KvQuant::kFp4E4m3:
      return qc::Kind::kFp4E4m3;
    case KvQuant::kFp4Pow2:
      return qc::Kind::kFp4Pow2;
    default:
      return qc::Kind::kFp8Pow2;
  }
}

// One block of `block` values: its scale byte and value codes (e4m3 bytes or e2m1 codes), and the
// fake-quantized values written back to x (backend/quant_codec.h's definitions).
uint8_t QuantizeBlock(KvQuant quant, float* x, int64_t block, uint8_t* codes) {
  if (quant == KvQuant::kNone) return 0;  // never packed
  const qc::Kind kind = CodecKind(quant);
  const uint8_t scale_byte = qc::ScaleByte(kind, Amax(x, block));
  const float s = qc::ScaleOfByte(kind, scale_byte);
  for (int64_t i = 0; i < block; ++i) {
    codes[i] = qc::Code(kind, x[i], s);
    x[i] = qc::Mul(qc::ValueOfCode(kind, codes[i]), s);
  }
  return scale_byte;
}

bool IsFp8(KvQuant quant) { return quant == KvQuant::kFp8Pow2 || quant == KvQuant::kFp8BfTail; }

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

float Pow2CeilScale(float v) { return qc::Pow2OfByte(qc::Pow2ScaleByte(v)); }

float RoundE2m1(float v) { return qc::E2m1Value(qc::E2m1Code(v)); }

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
  return codec().floats();
}

qc::PackedRow KvFormat::codec() const {
  if (!packed_) return {};
  return {CodecKind(quant_), static_cast<int>(quantized()), static_cast<int>(block_),
          static_cast<int>(tail_)};
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
  const qc::PackedRow layout = codec();
  uint8_t* scales = out + layout.scales_at();
  uint8_t* tail = out + layout.tail_at();
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
  const qc::PackedRow layout = codec();
  const uint8_t* scales = in + layout.scales_at();
  const uint8_t* tail = in + layout.tail_at();
  for (int64_t i = 0; i < tail_; ++i) {
    uint16_t bits;
    std::memcpy(&bits, tail + 2 * i, sizeof(bits));
    x[q + i] = Bf16ToFloat(bits);
  }
  const qc::Kind kind = CodecKind(quant_);
  for (int64_t b = 0; b < q; b += block_) {
    const float s = qc::ScaleOfByte(kind, scales[b / block_]);
    for (int64_t e = b; e < b + block_; ++e) {
      const uint8_t code = fp8 ? in[e] : (e % 2 == 0 ? (in[e / 2] & 0xF) : (in[e / 2] >> 4));
      x[e] = qc::Mul(qc::ValueOfCode(kind, code), s);
    }
  }
}

}  // namespace dsinfer::model
