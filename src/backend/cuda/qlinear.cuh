// The tensor-core FP8/FP4 linear (qlinear_sm90.cu), internal to backend/cuda: linear_sm90.cu's
// launchers route FP8 and FP4 weights here.
#pragma once

#include <cstdint>

#include "backend/cuda/linear.cuh"

namespace dsinfer::backend::cuda {

// The column order of quantized activation rows within each 64-column pair. kNatural: column c
// at c. kWgFp8 / kWgFp4: the staging order of the tiled GEMM on warpgroup MMA (qgemm_wg_sm90.cu)
// for FP8 / FP4 weights: qcore::StagedPos, each (k16 step, k half) of the decode kernel's k order
// as 16 contiguous bytes. Only that kernel reads the staged orders.
enum class QOrder : int { kNatural = 0, kWgFp8 = 1, kWgFp4 = 2 };

// act_quant of rows [0, rows) of x, columns [0, k): the e4m3 values as f16 (exact) q[r * ldq + c]
// (c placed by `order`) and scales s[r * lds + c / 128] (spec §2.12; the same bits as the
// in-kernel quantization).
struct ActQuantParams {
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t k = 0;
  uint16_t* q = nullptr;
  int64_t ldq = 0;
  float* s = nullptr;
  int64_t lds = 0;
  QOrder order = QOrder::kNatural;
  // > 0: the scales transposed instead, s[(c / 128) * ld_t + r] (the warp-specialized GEMM reads
  // a tile's 128 tokens' scales of a column block as one bulk copy).
  int64_t ld_t = 0;
};
void LaunchActQuant(const ActQuantParams& p, StreamHandle stream);

struct QLinearArgs {
  // Dense weights (w[1], s[1]: W3 of the fused SwiGLU pair), or per-expert tables.
  const void* w[2] = {nullptr, nullptr};
  const void* s[2] = {nullptr, nullptr};
  const void* const* ew[2] = {nullptr, nullptr};
  const void* const* es[2] = {nullptr, nullptr};
  ScaleFormat scale_format = ScaleFormat::kUe8m0;
  int64_t n = 0, k = 0;
  // Activations: x rows (dense: local row i; experts: pairs[i] / x_row_div), grouped input as
  // LinearParams. xq/xs: pre-quantized rows (set by the launcher), else quantized in the kernel.
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t group_rows = 0, group_stride = 0;
  int x_row_div = 1;
  const uint16_t* xq = nullptr;  // f16
  const float* xs = nullptr;
  int64_t ldq = 0, lds = 0;
  // xs transposed (ActQuantParams::ld_t = lds, a multiple of 128): dense launches of the
  // warp-specialized GEMM only (TryLaunchQGemmWs).
  bool xs_t = false;
  float* y = nullptr;
  int64_t ldy = 0;
  float limit = 0.0f;
  int64_t m = 0;  // dense rows
  const int32_t* active = nullptr;
  const int32_t* num_active = nullptr;
  const int32_t* offsets = nullptr;
  const int32_t* pairs = nullptr;
};

// The tiled FP8/FP4 GEMM for many rows (qgemm_sm90.cu): the same bits as QLinearKernel for every
// row. Supports: dense weights and routed experts (slots > 0: grid over the expert slots, rows
// through the pair list, rows_hint the expected rows per slot), one weight or the fused SwiGLU
// pair, activations pre-quantized (xq/xs), grouped dense input whose groups span whole 128-row
// blocks.
bool QGemmSupports(const QLinearArgs& a, bool fp4, bool expert);
void LaunchQGemm(const QLinearArgs& a, bool fp4, bool dual, int64_t rows_hint, int slots,
                 StreamHandle stream);
// Launches of the tiled GEMM so far in this process (tests check that it ran).
int64_t QGemmLaunches();
// Launches of the routed FP4 experts' row-tile kernel (QExpertRowsKernel; tests check it ran).
int64_t QExpertRowsLaunches();

// The same GEMM on warpgroup MMA (qgemm_wg_sm90.cu, KernelOptions::qgemm_wgmma): the same bits,
// with a.xq in the staged order of WgOrder(fp4) (LaunchQLinear's pre-pass writes it, or
// LaunchQRestage copies a caller's rows into it). QGemmWgSupports ignores a.xq.
QOrder WgOrder(bool fp4);
bool QGemmWgSupports(const QLinearArgs& a, bool fp4, bool dual, bool expert);
void LaunchQGemmWg(const QLinearArgs& a, bool fp4, bool dual, int64_t rows_hint, int slots,
                   StreamHandle stream);
// Launches of the warpgroup-MMA GEMM so far in this process (tests check that it ran).
int64_t QGemmWgLaunches();
// Its dense FP8 launches with the activations staged (a.xq / a.xs set, 16-byte aligned, a.ldq a
// multiple of 8) take the warp-specialized kernel (qgemm_ws_sm90.cu: TMA and bulk copies from one
// producer warp; the same bits). TryLaunchQGemmWs launches it and returns true, or returns false
// without launching when the launch is not one of those or the driver refuses its tensor map.
bool TryLaunchQGemmWs(const QLinearArgs& a, bool fp4, bool expert, bool dual, StreamHandle stream);
int64_t QGemmWsLaunches();
// Those of them with the act_quant scales transposed (QLinearArgs::xs_t).
int64_t QGemmWsScalesTLaunches();
// Quantized rows [0, rows) x columns [0, width) (a multiple of 64), natural order, into dst in
// `order` (the same ld).
void LaunchQRestage(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t width, int64_t ld,
                    QOrder order, StreamHandle stream);

// rows_hint: dense m, or expected pairs per expert slot (picks the token tile; never a result).
// x_rows: rows of x the call reads (for the act_quant pre-pass). slots: expert grid size (0:
// dense).
void LaunchQLinear(QLinearArgs a, const WeightRef& shape, bool dual, int64_t rows_hint, int slots,
                   int64_t x_rows, const ActQuantScratch& scratch, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
