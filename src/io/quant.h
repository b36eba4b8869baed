// Checkpoint weight formats (spec §4.4) and their conversion to fp32.
//   BF16 / F16 / F32: as is.
//   FP8 e4m3 with 128x128 block scales: W[i,j] = e4m3(Wq[i,j]) * s[i/B, j/B]; the scale tensor
//     (`.scale` or `.weight_scale_inv`) is F8_E8M0 (ue8m0) or F32.
//   FP4 e2m1 experts: I8/U8 [out, in/2], two codes per byte (low nibble = even column), with
//     F8_E8M0 scales [out, in/32].
// And the reverse (for `init-model`): quantizers producing exactly those layouts with power-of-two
// scales s = 2^ceil(log2(amax / qmax)) as the official code does (spec §2.12).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"

namespace dsinfer::io {

// Dequantizes `weight` to fp32 with logical shape `shape` ([out, in] for matrices, anything for
// plain tensors). `scale` is required for FP8 and packed-FP4 weights and must be null otherwise.
StatusOr<std::vector<float>> DequantizeToF32(const TensorView& weight, const TensorView* scale,
                                             const std::vector<int64_t>& shape, int fp8_block);

// What an FP8-instruction linear multiplies (backend/wgmma_fp8.h): the weight's e4m3 codes
// [rows, cols] and each row's scales [rows, ceil(cols / bc)] (bc: the FP8 block, an FP8 block's
// scale repeated on each of its rows, so that matrices stack by rows; FP4: 128). FP4 is
// re-expressed in FP8's form: per row and 128-column block, its scale 2^(e_max - 127), e_max the
// largest of its four groups' ue8m0 bytes, and each group's e2m1 codes as E2M1ToE4M3Shifted(code,
// e_max - e_group): exact while a block's group exponents span at most 8 binades (below, the
// codes round as e4m3 does). So an FP4 block is one chain of four k32 steps and one promotion,
// as an FP8 block is (the mode's kernels: fp8mma_linear_sm90.cu).
struct MmaOperand {
  std::vector<uint8_t> e4m3;
  std::vector<float> scale;
  int64_t rows = 0, cols = 0;
  int bc = 0;
};
// `weight` and `scale` as DequantizeToF32 takes them (which checks them in full: call it first),
// FP8 or packed FP4 only, cols a multiple of 32 (the instructions' k steps).
StatusOr<MmaOperand> QuantizedToMma(const TensorView& weight, const TensorView* scale,
                                    const std::vector<int64_t>& shape, int fp8_block);

struct QuantizedTensor {
  std::vector<uint8_t> data;   // e4m3 bytes, or packed e2m1 pairs
  std::vector<uint8_t> scale;  // ue8m0 bytes
  std::vector<int64_t> data_shape;
  std::vector<int64_t> scale_shape;
};

// [out, in] fp32 -> FP8 e4m3 with B x B ue8m0 block scales.
QuantizedTensor QuantizeFp8Blocks(const std::vector<float>& w, int64_t out, int64_t in, int block);
// [out, in] fp32 -> packed FP4 e2m1 with per-32 ue8m0 scales (in % 32 == 0).
QuantizedTensor QuantizeFp4(const std::vector<float>& w, int64_t out, int64_t in);

}  // namespace dsinfer::io
