// Row-wise ops: RMSNorm (spec §2.1, fp32), with interleaved RoPE on the trailing rope dims (§2.4).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct RmsNormParams {
  const float* x = nullptr;  // [rows, ldx] fp32, first `dim` columns used
  int64_t ldx = 0;
  float* y = nullptr;        // [rows, ldy] fp32 (may alias x when ldy == ldx)
  int64_t ldy = 0;
  int64_t rows = 0;
  int64_t dim = 0;
  const float* weight = nullptr;  // [dim] fp32 or null (no weight)
  float eps = 1e-6f;
  // Optional (LaunchRmsNorm only): the normalized rows also act_quant'ed as the FP8/FP4 linears
  // quantize their input (QuantizedRows: q [rows, ldq] e4m3 as f16, s [rows, lds] per 128
  // columns), for the linears that read y. Needs dim % 4 == 0 and dim <= 8 * NormThreads(dim).
  uint16_t* q = nullptr;
  int64_t ldq = 0;
  float* s = nullptr;
  int64_t lds = 0;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchRmsNorm(const RmsNormParams& p, StreamHandle stream);

// Threads of the block that normalizes one row of `dim` (its fixed-order sum depends on it): the
// mHC finish kernels use the same count so that their fused norm is this reduction.
int NormThreads(int64_t dim);


// RMSNorm of rows that are heads (row r = token r / heads), then RoPE of each row's trailing
// rope_dim values at the token's position (RopeCosSin, RotateWith), in one pass: the
// normalization is LaunchRmsNorm's. In place (y == x, ldy == ldx == dim) or not.
struct RmsNormRopeParams {
  RmsNormParams norm;               // rows = tokens * heads, dim = head dim
  int64_t heads = 1;
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  const int32_t* pos = nullptr;     // [tokens]
  // > 0: then each row rounded as DeepSeek-V4's FP8 cache stores it (fake_quant.cuh, the CPU's
  // WindowFormat().Pack): its first dim - rope_dim values kFp8Pow2 in blocks of kv_fp8_block (a
  // multiple of 32, at most 256; each block by one warp; not a multiple of the block: left as
  // is), its RoPE values rounded to bf16.
  int kv_fp8_block = 0;
  // Optional, with kv_fp8_block > 0 (dividing dim - rope_dim, a multiple of 8): each row also
  // stored packed (packed_row.cuh; qc::PackedRow {kFp8Pow2, dim - rope_dim, kv_fp8_block,
  // rope_dim}: the state's K=V row) at kv_packed + r * kv_packed_ld floats.
  float* kv_packed = nullptr;
  int64_t kv_packed_ld = 0;
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchRmsNormRope(const RmsNormRopeParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
