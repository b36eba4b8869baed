// Fp32 matrix product y = x · wᵀ on the CPU ("linear layer" orientation: w is [n, k] row-major,
// as checkpoints store weights).
//
// Batch invariance (docs/architecture.md §4): every output element is reduced over k in one fixed
// order (8 interleaved fp32 lanes, then a fixed pairwise lane sum, then the k % 8 tail), whatever
// m, the tile it falls in, or the thread that computes it. So a row's result does not depend on the
// other rows in the batch or on how a prompt was chunked.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/wgmma_fp8.h"
#include "base/thread_pool.h"

namespace dsinfer::backend::cpu {

// A row-major [n, k] weight matrix stored as fp32 or bf16. bf16 weights are widened to fp32 in
// registers (exactly), so the arithmetic and its order are those of the fp32 path: a model gives
// the same results whether its bf16-representable weights are held as fp32 or bf16.
struct WeightView {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
  // The weight came from an FP8/FP4 checkpoint tensor: its GEMM input is quantized first, as the
  // official FP8/FP4 GEMMs do (spec §2.12 act_quant; see ActQuantRow).
  bool act_quant = false;
  // Set (e4m3 non-null): the FP8-instruction numerics mode (backend/wgmma_fp8.h): the products
  // of the input's act_quant codes with these codes, as Fp8MmaGemm computes them (act_quant set).
  fp8mma::Operand mma;
  WeightView() = default;
  WeightView(const float* w) : f32(w) {}  // NOLINT: implicit, fp32 pointers are views
  static WeightView Bf16(const uint16_t* w) {
    WeightView v;
    v.bf16 = w;
    return v;
  }
  // The view starting at row `row` of a matrix with `k` columns.
  WeightView Offset(int64_t row, int64_t k) const {
    WeightView v = *this;
    if (v.f32) v.f32 += row * k;
    if (v.bf16) v.bf16 += row * k;
    if (v.mma.e4m3) {  // per-row scales (br 1)
      v.mma.e4m3 += row * k;
      v.mma.scale += row * ((k + v.mma.bc - 1) / v.mma.bc);
    }
    return v;
  }
};

// x: [m, k] with row stride ldx; w: [n, k] contiguous; y: [m, n] with row stride ldy.
// pool may be null (runs on the calling thread).
void Gemm(const float* x, int64_t m, int64_t k, int64_t ldx, WeightView w, int64_t n, float* y,
          int64_t ldy, ThreadPool* pool);

// Convenience: contiguous x [m, k] and y [m, n].
inline void Linear(const float* x, int64_t m, int64_t k, WeightView w, int64_t n, float* y,
                   ThreadPool* pool) {
  Gemm(x, m, k, k, w, n, y, n, pool);
}

// spec §2.12 act_quant, in fp32: each 128-wide block of x[0, k) (the last may be shorter) becomes
// e4m3(x / s) * s with s = 2^ceil(log2(max(amax, 1e-4) / 448)), e4m3 rounded to nearest even and
// clamped to +-448. These are exactly the values an FP8 GEMM's activation operand holds (its
// products with e4m3/e2m1 weights times power-of-two scales are exact in fp32), so a GEMM on them
// is the official FP8/FP4 GEMM up to fp32 summation order. The CUDA backend quantizes the same way.
void ActQuantRow(const float* x, int64_t k, float* out);
inline constexpr int kActQuantBlock = 128;

// act_quant as an FP8 operand holds it: each 128-wide block's e4m3 codes and its scale, so that
// E4m3(codes[i]) * scales[i / 128] is ActQuantRow's out[i] bit for bit.
void ActQuantCodes(const float* x, int64_t k, uint8_t* codes, float* scales);

// The FP8-instruction linear (backend/wgmma_fp8.h: its numerics and operands): y [m, n] (row
// stride ldy) of x [m, k] (act_quant codes and scales) and w [n, k] (e4m3 codes; FP4 weights as
// their values' e4m3 codes) through fp8mma::Dot, element by element, so a row's values do not
// depend on m or the thread split. pool may be null.
void Fp8MmaGemm(const fp8mma::Operand& x, int64_t m, const fp8mma::Operand& w, int64_t n, float* y,
                int64_t ldy, ThreadPool* pool);

// Dot product with the same reduction order as Gemm.
float Dot(const float* a, const float* b, int64_t k);

}  // namespace dsinfer::backend::cpu
