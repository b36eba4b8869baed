// Decode GEMV (CUDA-only, internal to backend/cuda): the linear layer for a few rows of x (decode,
// small batches) with every weight byte of a warp's rows in flight at once, loaded before the
// grid-dependency wait (launch.cuh) so that it overlaps the previous kernel.
//
// Exactness: each output element is bit-identical to linear_sm90.cu's LinearBody. That kernel
// gives row r a group of TPR threads (TPR = ThreadsPerRow(chunks), a function of format and k);
// thread t accumulates 16-byte chunks t, t + TPR, ... in order, each warp of the group reduces by a
// butterfly, and the group's TPR/32 warp sums are added in order from 0. Here one warp does a
// row's whole reduction: lane l plays threads l + 32q (q < QN = TPR/32) with one accumulator per q
// (chunk l + 32j belongs to q = j mod QN), runs each accumulator's butterfly, and adds them in
// order. Chunk dot products use the same fmaf chains as LinearBody.
// fp32 and bf16 weights only: FP8/FP4 take the tensor-core linear (qlinear_sm90.cu).
#pragma once

#include <cstdint>

#include "backend/cuda/linear.cuh"
#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

// One GEMV launch: dense rows (data != nullptr) or routed experts (edata != nullptr).
// Dual: y = SwiGLU(x·W1ᵀ, x·W3ᵀ, limit) with W3 = data2 (dense) or edata2 (experts).
struct GemvJob {
  WeightRef w;  // format (f32 or bf16), n, k; data for dense
  const void* data2 = nullptr;
  bool dual = false;
  float limit = 0.0f;
  const void* const* edata = nullptr;
  const void* const* edata2 = nullptr;
  const int32_t* active = nullptr;
  const int32_t* num_active = nullptr;
  const int32_t* offsets = nullptr;
  const int32_t* pairs = nullptr;
  int x_row_div = 1;
  int max_slots = 0;
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t m = 0;  // dense rows
  int64_t x_group_rows = 0;
  int64_t x_group_stride = 0;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Launches the job when the decode GEMV supports it (vector path, 64 <= chunks, dense m <= 4 and
// m == 1 when a row spans several units, expert pairs per slot small and one unit per row, group
// rows a multiple of the unit's rows); false: nothing launched.
bool TryLaunchGemv(const GemvJob& job, bool x_aligned, int64_t rows_hint, StreamHandle stream);

// Per-format launchers (gemv_<format>_sm90.cu); same contract.
// qn: accumulators per row; js: chunks per lane per unit; blocks_x: the grid's x size.
bool TryLaunchGemvF32(const GemvJob& job, int qn, int js, int blocks_x, StreamHandle stream);
bool TryLaunchGemvBf16(const GemvJob& job, int qn, int js, int blocks_x, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
