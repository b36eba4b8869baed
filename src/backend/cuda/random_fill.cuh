// Deterministic random device buffers from a counter-based hash (no host round trip): benchmark
// weights in their checkpoint formats and synthetic request state.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/quant_codec.h"

namespace dsinfer::backend::cuda {

enum class RandomKind : int32_t {
  kF32Normal = 0,  // fp32 ~ mean + std * N(0,1)-ish (sum of uniforms)
  kBf16Normal = 1, // bf16 of the same
  kFp8 = 2,        // e4m3 bytes uniform over finite codes of |x| <= 448 * `std`-ish range
  kFp4 = 3,        // random bytes (every e2m1 pair is finite)
  kByte = 4,       // every byte = `mean` (e.g. a ue8m0 scale exponent)
};

struct RandomFillParams {
  void* data = nullptr;
  int64_t count = 0;  // elements (bytes for kFp8/kFp4/kByte)
  RandomKind kind = RandomKind::kF32Normal;
  uint64_t seed = 0;
  float mean = 0.0f;
  float std = 1.0f;
};
void LaunchRandomFill(const RandomFillParams& p, StreamHandle stream);

// Synthetic packed state rows (packed_row.cuh; the FP8 cache's K=V rows and index keys): each of
// `rows` rows encodes values ~ std * N(0,1)-ish as a writer would (valid codes and scales, the
// tail bf16). Row r at data + (r / rows_per_page) * page_floats + (r % rows_per_page) *
// row_floats; format.block <= 64.
struct RandomPackedRowsParams {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t rows_per_page = 1;
  int64_t page_floats = 0;
  int64_t row_floats = 0;
  qc::PackedRow format;
  uint64_t seed = 0;
  float std = 1.0f;
};
void LaunchRandomPackedRows(const RandomPackedRowsParams& p, StreamHandle stream);

// A benchmark's bandwidth probe: a plain streaming read of bytes / 16 16-byte words of data
// (16-byte aligned) on 4 blocks of 256 threads per SM (16-byte loads, four in flight per thread,
// grid-stride, only an XOR of the values); out: one word of device scratch that keeps the loads
// alive. Launched without programmatic dependence: back-to-back probes do not overlap.
void LaunchReadProbe(const void* data, int64_t bytes, uint32_t* out, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
