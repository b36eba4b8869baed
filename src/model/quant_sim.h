// The QAT fake-quantizers of the models' forward passes, shared by the families: DeepSeek-V4.1's
// (reference: transformers `modeling_deepseek_v41.py`, `_fake_quant_fp8_block` /
// `_fake_quant_fp4_block`), always on, and DeepSeek-V4's official ones (spec §2.12: `fp8_sim` of
// the K=V rows' nope dims in blocks of 64, the indexer's Hadamard rotation + `fp4_sim` in blocks of
// 32), on with the FP8 cache (io::KvCacheDtype::kFp8). They are part of the model's semantics,
// applied even to an unquantized checkpoint: values are rounded onto the FP8 / FP4 grid of the
// cache format and dequantized, in place. A vector whose length is not a multiple of the block is
// left as is (the reference does the same for tiny test shapes).
//
//   Fp8BlockSim (window KV, block 32 / V4: 64):
//                                        s = 2^ceil(log2(max(amax, 1e-4) * (1/448))),
//                                        x = e4m3_rne(clamp(x / s, +-448)) * s
//   Fp4BlockSim, ue8m0 (indexer q / k, block 32):
//                                        s = 2^ceil(log2(max(amax, 6*2^-126) * (1/6)))
//   Fp4BlockSim, e4m3 scales (compressed KV, block 16):
//                                        s = e4m3_rne(max(amax, 6*2^-9) / 6)
//   then (both FP4): x = e2m1(clamp(x / s, +-6)) * s, e2m1 rounded to nearest with ties to the
//   even code (0.25, 1.25, 2.5, 5 round down; 0.75, 1.75, 3.5 round up).
//
//   HadamardRotate (V4's indexer q / keys, before Fp4BlockSim): x = H_n x * n^-0.5, H_n the
//   natural-order (Sylvester) Hadamard matrix, by the butterflies of the fast transform (stage
//   h = 1, 2, 4, ...: (a, b) -> (a + b, a - b)), then one multiply per value by the float
//   1 / sqrt(n) (the official `fast_hadamard_transform(x, scale = n^-0.5)`).
//
// The state keeps the cache's entries packed, as the release stores them (`KvFormat`): FP8 rows
// as e4m3 bytes + one power-of-two scale byte per block (V4's `fp8_ds_mla`: then the trailing
// RoPE dims as bf16), FP4 rows as e2m1 nibbles + one scale byte (e4m3 or power-of-two) per
// block. Unpack(Pack(x)) equals the fake-quantized x bit for bit
// (both compute code value × scale the same way), so packed state changes no logit. Pure
// functions; thread-safe.
#pragma once

#include <cstdint>

#include "backend/quant_codec.h"

namespace dsinfer::model {

// 2^ceil(log2(v)) for v > 0 by the exponent bits (exponent - 127 + (mantissa != 0)), as the
// reference's `_pow2_ceil_scale`.
float Pow2CeilScale(float v);
// Rounds a value already clamped to [-6, 6] onto the e2m1 grid (see above).
float RoundE2m1(float v);

void Fp8BlockSim(float* x, int64_t n, int64_t block);
void Fp4BlockSim(float* x, int64_t n, int64_t block, bool e4m3_scales);
// In place (n a power of two; otherwise left as is, as the fake-quantizers).
void HadamardRotate(float* x, int64_t n);

// How one cache row of `n` values is stored.
enum class KvQuant {
  kNone,     // fp32 as given (no rounding; row_floats() = n)
  kFp8Pow2,  // e4m3 values, power-of-two scales (window K=V, block 32)
  kFp4E4m3,  // e2m1 values, e4m3 scales (compressed KV entries, block 16)
  kFp4Pow2,  // e2m1 values, power-of-two scales (index keys, block 32)
  // V4's `fp8_ds_mla` K=V rows: the first n - tail values as kFp8Pow2 (block 64), the trailing
  // `tail` (RoPE) values rounded to bf16 and stored as such (448 + 128 + 7 bytes at d = 512).
  kFp8BfTail,
};

class KvFormat {
 public:
  // `tail`: kFp8BfTail's bf16 values (the others take none).
  KvFormat(KvQuant quant, int64_t n, int64_t block, int64_t tail = 0);
  // False when the quantized values are not a multiple of the block: the fake-quantizer leaves
  // such rows alone, so they are stored as floats (kFp8BfTail: its tail still rounded to bf16).
  bool packed() const { return packed_; }
  int64_t values() const { return n_; }
  // Floats of page memory per row (the packed bytes rounded up to whole floats).
  int64_t row_floats() const;
  // The packed row's codec layout (backend/quant_codec.h; codes, bf16 tail, scales), what a GPU
  // kernel reading the state decodes; q == 0 when not packed.
  backend::qc::PackedRow codec() const;
  // Fake-quantizes `x` [n] in place and writes its packed row to `row` [row_floats()].
  void Pack(float* x, float* row) const;
  // The fake-quantized values of a packed row.
  void Unpack(const float* row, float* x) const;

 private:
  int64_t quantized() const { return n_ - tail_; }

  KvQuant quant_;
  int64_t n_, block_, tail_;
  bool packed_;
};

}  // namespace dsinfer::model
