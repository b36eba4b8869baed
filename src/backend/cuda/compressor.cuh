// CSA / HCA compressors (spec §2.6, §2.8) and the per-position rings they read.
//   LaunchAddApe:        proj[t, width + c] += ape[pos_t % rate, c]  (gate half of each row)
//   LaunchCompressEmit:  for every row t whose position closes a window ((pos+1) % rate == 0),
//                        pool the window's rows per channel (softmax of the gate scores), RMSNorm,
//                        RoPE at the window's first position, and store entry pos/rate.
//   LaunchRingAppend:    copy this call's rows into a position ring (only the newest `cap` rows of
//                        each request are written, so rows never collide).
// Rows of positions inside this call come from `proj`; older ones from the ring.
#pragma once

#include <cstdint>

#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "base/status.h"

namespace dsinfer::backend::cuda {

void LaunchAddApe(float* proj, int64_t n, int64_t width, const float* ape, int rate,
                  const int32_t* pos, StreamHandle stream);

struct CompressEmitParams {
  TokenMeta meta;
  const float* proj = nullptr;  // [n, 2 * width]: [kv (width) | gate + ape (width)] of this call
  RingRef rows;                 // the same rows of earlier positions (width 2 * width)
  ListRef entries;              // out: entry w of the slot (width dim)
  int rate = 0;
  int dim = 0;                  // entry width
  bool overlap = false;         // CSA: width = 2 * dim, previous window's Ca half + current Cb half
  const float* norm = nullptr;  // [dim]
  float eps = 1e-6f;
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2] (compress table)
  // DeepSeek-V4.1 (off for V4): latent_out set: the pooled + RMSNormed entry before its RoPE is
  //   also written to latent_out[t * dim ..] for every row t that closes a window (other rows
  //   untouched).
  // The stored entry's rounding (fake_quant.cuh), after its RoPE: entry_hadamard: first rotated
  //   (V4's index keys with the FP8 cache); entry_block > 0: its first dim - entry_bf16_tail
  //   values fake-quantized `entry_quant` in blocks of entry_block (not a multiple: left as is),
  //   the tail rounded to bf16. V4.1's KV entries: kFp4E4m3 / 16; V4 with the FP8 cache: KV
  //   entries kFp8Pow2 / 64 with the RoPE dims as the tail, index keys kFp4Pow2 / 32.
  // V4.1's ratio 1 runs through the same pooling: proj's gate half must be finite (zeros: a
  // softmax over one row weighs it exactly 1, the entry is the kv row itself); no ring is read at
  // ratio 1 (`rows` may be empty).
  float* latent_out = nullptr;
  bool entry_hadamard = false;
  FakeQuant entry_quant = FakeQuant::kFp4E4m3;
  int entry_block = 0;
  int entry_bf16_tail = 0;
  // entry_packed (V4 with the FP8 cache): the entry stored as its packed row (packed_row.cuh:
  //   qc::PackedRow {entry_quant, dim - entry_bf16_tail, entry_block, entry_bf16_tail}, whose
  //   values are the rounding above; `entries` rows that row's floats wide) instead of fp32.
  bool entry_packed = false;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchCompressEmit(const CompressEmitParams& p, StreamHandle stream);

// DeepSeek-V4.1's index keys (reference: model/deepseek_v41/compressor.cc): for every row t at
// position p with (p + 1) % rate == 0, k = RMSNorm(keys[t]) * norm (the sum of squares in double,
// a fixed-order block reduction), RoPE of its trailing rope_dim values at the entry's first
// position p + 1 - rate (RopeCosSin / RotateWith, as every GPU RoPE), fake-quantized kFp4Pow2 in
// blocks of fp4_block (0: not quantized), stored as entry (p + 1) / rate - 1.
struct IndexKeyEmitParams {
  TokenMeta meta;
  const float* keys = nullptr;  // [n, dim] wk · latent of this call's rows (rows that close a
                                // window are valid; others are not read)
  ListRef entries;              // out: entry w of the slot (width dim)
  int rate = 0;
  int dim = 0;
  const float* norm = nullptr;  // [dim] k_norm
  float eps = 1e-6f;
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2] (compress table)
  int fp4_block = 32;               // kFp4Pow2
  Status Validate() const;
};
void LaunchIndexKeyEmit(const IndexKeyEmitParams& p, StreamHandle stream);

struct RingAppendParams {
  TokenMeta meta;
  const float* src = nullptr;  // [n, ld] rows of this call
  int64_t ld = 0;
  RingRef ring;                // ring.width floats copied per row
};
void LaunchRingAppend(const RingAppendParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
