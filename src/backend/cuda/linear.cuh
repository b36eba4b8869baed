// Linear layers y = x · Wᵀ with W in its checkpoint format (spec §4.4): fp32 and bf16 weights
// against fp32 activations (dequantized in registers, the CPU backend's precision: parity ~1e-6);
// FP8 e4m3 with block scales (ue8m0 or fp32) and packed FP4 e2m1 with per-32 ue8m0 scales on the
// tensor cores with the official numerics (qlinear_sm90.cu: the activation is quantized per 128
// columns to e4m3 first, spec §2.12, as the CPU backend's ActQuantRow). Outputs are fp32.
//
// Two entry points: LaunchLinear (one matrix, dense rows) and LaunchExpertLinear (the MoE grouped
// form: one matrix per routed expert, each applied to the token rows routed to it, with the routing
// read from device memory so that a decode step can be captured in a CUDA graph).
//
// Batch invariance and determinism (ARCHITECTURE.md §4): every output element is the same fixed
// reduction over k whatever the number of rows m, the m-tile and the grid. fp32/bf16: thread j of
// the row's thread group accumulates 16-byte chunks j, j+TPR, ... in order, then a butterfly over
// the warp and a fixed-order sum over the group's warps, the group width TPR depending only on
// (format, k). FP8/FP4: fixed k slices per warp, each a fixed chain of mma steps (qlinear_sm90.cu).
// So a row's result does not depend on the rest of the batch or the schedule.
//
// Header without CUDA types; launchers allocate nothing.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

enum class WeightFormat : int32_t { kF32 = 0, kBf16 = 1, kFp8 = 2, kFp4 = 3 };
enum class ScaleFormat : int32_t { kNone = 0, kUe8m0 = 1, kF32 = 2 };
// FP8 and FP4: the formats the tensor-core linear takes (quantized activations, tiled layouts).
inline bool IsQuantized(WeightFormat f) {
  return f == WeightFormat::kFp8 || f == WeightFormat::kFp4;
}

// A weight matrix of logical shape [n, k] (out_features, in_features) on the device.
struct WeightRef {
  WeightFormat format = WeightFormat::kF32;
  // kF32/kBf16: [n, k] row-major elements. kFp8: the checkpoint's [n, k] bytes re-ordered by
  // TileFp8ForMma (Fp8TiledBytes: rows padded to 16). kFp4: the checkpoint's [n, k/2] bytes (low
  // nibble = even column) re-ordered by TileFp4ForMma.
  const void* data = nullptr;
  // kFp8: [ceil(n/block), ceil(k/block)] (ue8m0 bytes or fp32). kFp4: the [n, k/32] ue8m0 bytes
  // re-ordered and biased by TileFp4ScalesForMma.
  const void* scale = nullptr;
  ScaleFormat scale_format = ScaleFormat::kNone;
  int64_t n = 0;
  int64_t k = 0;
  int block = 128;  // kFp8 block edge (multiple of 16)
  // kFp8 / kFp4 in the FP8-instruction numerics mode's layout (fp8mma_linear_sm90.cu; its CPU
  // reference backend/wgmma_fp8.h) instead of the tiled ones above: data as the checkpoint
  // stores it ([n, k] e4m3 bytes, or [n, k / 2] e2m1 pairs with the even column in the low
  // nibble); scale per row and 128-column block, MmaScaleLd(n) rows apart: kFp8 fp32
  // [ceil(k / 128)][MmaScaleLd(n)] (the row's block's scale), kFp4 ue8m0 bytes
  // [ceil(k / 128)][MmaScaleLd(n)][4] (the block's four 32-column groups). Rows past n are 0.
  bool mma = false;
  size_t bytes() const;  // bytes of data + scale
};

// The FP8-instruction layout's scale rows: n rounded up to the kernels' 128-row blocks; and the
// scales' bytes (4 per row and block, and 128 rows' more: a 128-row block of a row group read from
// its first row stays inside).
inline int64_t MmaScaleLd(int64_t n) { return (n + 127) / 128 * 128; }
inline int64_t MmaScaleBytes(int64_t n, int64_t k) {
  return ((k + 127) / 128 * MmaScaleLd(n) + 128) * 4;
}
// Host-side packers of that layout's scales into dst (MmaScaleBytes(n, k)). per_row:
// [n, ceil(k / 128)] fp32 (a row's block scales, e.g. io::QuantizedToMma's); groups: the
// checkpoint's [n, k / 32] ue8m0 bytes.
void PackMmaScalesFp8(const float* per_row, int64_t n, int64_t k, float* dst);
void PackMmaScalesFp4(const uint8_t* groups, int64_t n, int64_t k, uint8_t* dst);

// Device scratch for quantizing many activation rows once per linear instead of in every block
// (FP8/FP4 with more than 16 rows use it when it is large enough; results do not depend on it).
// One per stream: concurrent linears must not share it.
//
// The FP8-instruction mode (WeightRef::mma) needs it for every linear: MmaQuantBytes(x_rows,
// width) bytes in q, MmaScaleCount(x_rows, width) floats in s, and for the
// slice partials of launches too small to fill the GPU (optional: without it they run unsplit,
// the same bits) `part`.
struct ActQuantScratch {
  uint8_t* q = nullptr;  // the quantized rows as f16: 2 bytes per element
  int64_t q_bytes = 0;
  float* s = nullptr;
  int64_t s_count = 0;
  float* part = nullptr;
  int64_t part_count = 0;
};
// The FP8-instruction mode's quantized row pitch: whole 128-column blocks of e4m3 codes.
inline int64_t MmaQuantLd(int64_t width) { return (width + 127) / 128 * 128; }
// What its scratch must hold for `rows` rows of `width` columns: q bytes and s floats.
inline int64_t MmaQuantBytes(int64_t rows, int64_t width) { return rows * MmaQuantLd(width); }
inline int64_t MmaScaleCount(int64_t rows, int64_t width) {
  return (width + 127) / 128 * MmaScaleLd(rows);
}
// The routed experts' launch of `pairs` listed pairs over `slots` expert slots from `rows` input
// rows: the act_quant rows, then the pairs' rows gathered into list order (each slot's first at a
// multiple of 4, GatheredRow) with a widest tile's rows of slack for the last tile's scales. What
// the TMA-fed experts' tile needs of the scratch (fp8mma_experts_sm90.cu; with less it takes the
// other form).
constexpr int kMmaExpertTileMaxRows = 192;  // that tile's widest token tile (its wide form's)
inline int64_t MmaGatheredRows(int64_t pairs, int64_t slots) { return pairs + 3 + 4 * slots; }
inline int64_t MmaGatheredLd(int64_t pairs, int64_t slots) {
  return (MmaGatheredRows(pairs, slots) + kMmaExpertTileMaxRows + 3) / 4 * 4;
}
// Where the gathered codes and scales start: after the act_quant rows' (1024-byte / 16-byte
// aligned).
inline int64_t MmaGatheredQuantOffset(int64_t rows, int64_t width) {
  return (MmaQuantBytes(rows, width) + 1023) / 1024 * 1024;
}
inline int64_t MmaGatheredScaleOffset(int64_t rows, int64_t width) {
  return (MmaScaleCount(rows, width) + 3) / 4 * 4;
}
inline int64_t MmaExpertQuantBytes(int64_t rows, int64_t pairs, int64_t slots, int64_t width) {
  return MmaGatheredQuantOffset(rows, width) + MmaGatheredRows(pairs, slots) * MmaQuantLd(width);
}
inline int64_t MmaExpertScaleCount(int64_t rows, int64_t pairs, int64_t slots, int64_t width) {
  return MmaGatheredScaleOffset(rows, width) + (width + 127) / 128 * MmaGatheredLd(pairs, slots);
}

// FP8/FP4 shapes the tensor-core linear takes: k % 64 == 0, k <= 8192 (16384 for one FP8
// weight), FP4 n % 16 == 0, FP8 block 128 (loaders check this). `dual`: as the fused SwiGLU pair.
bool QLinearSupports(const WeightRef& w, bool dual, std::string* why);

// The GPU layout of an FP4 matrix: for each 16-row tile and 64-column pair, 32 lanes x 16 bytes
// (lane 4g+t: words t and 4+t of the pair's 32-byte chunk of rows g and g+8), so that one 16-byte
// load gives a lane its mma fragments for two k steps), each word's 8 values re-coded for the
// kernel's conversion (a bit permutation: byte b holds columns b and 4 + b). Host-side; src and dst
// [n * k / 2] bytes.
void TileFp4ForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k);

// The GPU layout of an FP4 matrix's ue8m0 scales ([n, k/32] bytes): for each 16-row tile and
// 64-column pair, 8 words (g = 0..7) of the 4 scale bytes lane 4g+t needs — rows g and g+8, the
// pair's two 32-column groups: (g, 0), (g, 1), (g+8, 0), (g+8, 1) — so that one 32-bit load gives
// them, each byte b stored as Fp4GpuScaleByte(b): the float the kernel multiplies by (2^(b-127)
// times 2^14, the FP4 weights entering the mma as f16 value * 2^-14) is then the byte << 23.
// Host-side; src and dst [n * k / 32] bytes.
void TileFp4ScalesForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k);
// min(b, 241) + 14: 2^(b - 113) is a normal float for b <= 240 (b = 0 included); b >= 241 is
// infinite either way.
inline uint8_t Fp4GpuScaleByte(uint8_t b) { return static_cast<uint8_t>((b < 241 ? b : 241) + 14); }

// The GPU layout of an FP8 matrix: for each 16-row tile and 64-column pair, two 512-byte halves
// (rows g and g+8) of 32 lanes x 16 bytes (lane 4g+t: bytes 16t..16t+15 of the pair's row), so that
// a warp's 16-byte loads are contiguous and a tile's k range is one contiguous stretch; rows past n
// are zero. Host-side; src [n * k] bytes, dst Fp8TiledBytes(n, k).
int64_t Fp8TiledBytes(int64_t n, int64_t k);
void TileFp8ForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k);

// Activation rows already quantized as the FP8/FP4 linears quantize their input (act_quant: e4m3
// values as f16, one power-of-two scale per 128 columns; the same bits as the kernels' own
// quantization). A linear given them skips its own (and then needs no x). Two forms: q / s for
// the default linears, c / cs for the FP8-instruction mode's (WeightRef::mma; each linear takes
// only its own form and ignores the other).
struct QuantizedRows {
  const uint16_t* q = nullptr;  // [rows, ldq] f16
  int64_t ldq = 0;
  const float* s = nullptr;  // [rows, lds]
  int64_t lds = 0;
  // The mode's (LaunchMmaActQuantRows'): e4m3 codes c [rows, ldc] (ldc >= MmaQuantLd(width), a
  // multiple of 16), the scales transposed, cs[(column / 128) * ldcs + row] (ldcs >= rows).
  const uint8_t* c = nullptr;
  int64_t ldc = 0;
  const float* cs = nullptr;
  int64_t ldcs = 0;
};
// act_quant of rows [0, rows) of x ([rows, ldx] fp32, columns [0, k)) into q_buf (rows x
// QuantizedLd(k) f16) and s_buf (rows x QuantizedScales(k) floats).
int64_t QuantizedLd(int64_t k);
int64_t QuantizedScales(int64_t k);
QuantizedRows LaunchActQuantRows(const float* x, int64_t ldx, int64_t rows, int64_t k,
                                 uint16_t* q_buf, float* s_buf, StreamHandle stream);
// The mode's form of `rows` rows of `width` columns in c (MmaQuantBytes(rows, width) bytes) and
// cs (MmaScaleCount(rows, width) floats): the pitches every mode launch quantizes with.
inline QuantizedRows MmaCodes(const uint8_t* c, const float* cs, int64_t rows, int64_t width) {
  QuantizedRows r;
  r.c = c;
  r.ldc = MmaQuantLd(width);
  r.cs = cs;
  r.ldcs = MmaScaleLd(rows);
  return r;
}
// The same in the FP8-instruction mode's form: c_buf MmaQuantBytes(rows, k) bytes, cs_buf
// MmaScaleCount(rows, k) floats.
QuantizedRows LaunchMmaActQuantRows(const float* x, int64_t ldx, int64_t rows, int64_t k,
                                    uint8_t* c_buf, float* cs_buf, StreamHandle stream);

struct LinearParams {
  WeightRef w;
  ActQuantScratch aq;
  const float* x = nullptr;  // [m, ldx] fp32; row i, columns [xoff(n), xoff(n) + k)
  int64_t ldx = 0;
  QuantizedRows xq;  // FP8/FP4: x's rows quantized already (optional)
  int64_t m = 0;
  // Grouped input (the attention's wo_a): output row r reads x columns starting at
  // (r / x_group_rows) * x_group_stride. 0: every row reads from column 0.
  int64_t x_group_rows = 0;
  int64_t x_group_stride = 0;
  float* y = nullptr;  // [m, ldy] fp32; y[i, r] for r < n
  int64_t ldy = 0;
  // Set by LaunchLinearSwiglu only (fp32/bf16): W3 of the fused SwiGLU pair (same shape and
  // format as w).
  const void* dual_data = nullptr;
  float dual_limit = 0.0f;
  // The FP8-instruction mode (w.mma) only: LaunchLinearSwiglu leaves the SwiGLU output's
  // act_quant codes in aq (and returns them, W2's xq) in place of fp32 rows in y (y then holds
  // W1's output, u W3's).
  bool swiglu_to_aq = false;
};

void LaunchLinear(const LinearParams& p, StreamHandle stream);

// Routed experts: all experts share format and shape; per-expert pointers live on the device.
struct ExpertLinearParams {
  WeightRef shape;                  // format, scale_format, n, k, block (data/scale unused)
  ActQuantScratch aq;
  const void* const* data = nullptr;   // [E] device array: expert e's data pointer
  const void* const* scale = nullptr;  // [E] device array: expert e's scale pointer
  const float* x = nullptr;         // [*, ldx] fp32; pair p reads row p / x_row_div
  int64_t ldx = 0;
  QuantizedRows xq;  // FP8/FP4: x's rows quantized already (optional)
  int x_row_div = 1;
  float* y = nullptr;               // [pairs, ldy] fp32; pair p writes row p
  int64_t ldy = 0;
  const int32_t* active = nullptr;      // [max_slots] expert id of each active slot
  const int32_t* num_active = nullptr;  // [1] active slots (<= max_slots)
  const int32_t* offsets = nullptr;     // [max_slots + 1] pair-list start of each slot
  const int32_t* pairs = nullptr;       // [total pairs] pair ids grouped by slot, ascending in a slot
  int max_slots = 0;                // grid size; slots >= *num_active exit at once
  int64_t total_pairs = 0;          // picks the m-tile (never changes results)
  // Set by LaunchExpertLinearSwiglu only (fp32/bf16): [E] W3 pointers of the fused SwiGLU pair.
  const void* const* dual_data = nullptr;
  float dual_limit = 0.0f;
  // The FP8-instruction mode (shape.mma) only: LaunchExpertLinearSwiglu leaves the SwiGLU
  // output's act_quant codes in aq (and returns them, the W2 launch's xq) in place of fp32 rows
  // in y (y then holds W1's output, u W3's).
  bool swiglu_to_aq = false;
};

void LaunchExpertLinear(const ExpertLinearParams& p, StreamHandle stream);

// y = SwiGLU(x·W1ᵀ, x·W3ᵀ) (limit > 0 clamps as the CPU reference), W1 = p1.w, output p1.y. One
// fused launch where the decode GEMV applies, else W1 and W3 (into `u`, [m or pairs, ldy]
// scratch) and LaunchSwiglu: the same values either way.
// (Both return the SwiGLU output's codes with p1.swiglu_to_aq, else nothing.)
QuantizedRows LaunchLinearSwiglu(const LinearParams& p1, const WeightRef& w3, float* u, float limit,
                                 StreamHandle stream);
QuantizedRows LaunchExpertLinearSwiglu(const ExpertLinearParams& p1, const void* const* w3_data,
                                       const void* const* w3_scale, float* u, float limit,
                                       StreamHandle stream);

}  // namespace dsinfer::backend::cuda
