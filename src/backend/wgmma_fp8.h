// What Hopper's FP8 warpgroup MMA computes (wgmma m64nNk32 .f32.e4m3.e4m3), as a CPU function,
// and the FP8-instruction linear built on it: the CPU reference of an FP8-instruction numerics
// mode (issue 27; docs/perf.md, sessions 38-39), whose kernels multiply the operands' e4m3 codes
// as stored and promote each short chain into an fp32 sum (DeepGEMM's design).
//
// One k32 step d = c + sum_k a_k b_k (the products exact: 4-bit by 4-bit significands):
//   1. E = the largest of E(a_k) + E(b_k) over the nonzero products and, when c != 0, of
//      floor(log2 |c|); E(x) is an e4m3 code's exponent, a subnormal's taken as -6 (the smallest
//      normal one) unless `subnormal_true_exponent`;
//   2. every product and c cut toward zero to a multiple of 2^(E - 13);
//   3. their sum (exact) cut toward zero to 13 bits after its leading one when that lies above
//      E, else to the multiple of 2^(E - 13) it already is (or, `cut_at_own_lead`, always to 13
//      bits after its own leading one).
// Chained steps (k > 32) feed each step's fp32 result to the next as c; the first has c = 0.
//
// Fitted (session 38) to the 27 elements probe_fp8_mma_bits printed on an H200 in session 31
// (tests/data/wgmma_fp8_h200_s31.json: all 27 match; 12 fraction bits match 4, 14 match 8).
// Checked (session 39, H100) against every element of the probe: 0 mismatches of 1,024,000 in each
// of 12 cases (exact, random e4m3, e2m1 x e4m3 and act_quant-like blocks; 1, 2 and 4 chained
// steps), N = 256 as N = 8; 12 or 14 bits miss 65-88% of the inexact classes' elements; the two
// variant flags give 0 mismatches too (these classes do not tell them apart). Both FP8
// experiments' kernels matched it on every output they checked.
//
// By this model an element depends only on its own row of A and column of B, not on N, the
// other columns or the tile: a kernel chaining these steps in a fixed k order is batch-invariant.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/quant_codec.h"

namespace dsinfer::backend::fp8mma {

namespace qc = dsinfer::backend::qc;

struct WgmmaFp8Model {
  bool subnormal_true_exponent = false;
  bool cut_at_own_lead = false;
  int fraction_bits = 13;  // (the fit: 12 and 14 miss most of the H200's elements)

  struct Table {
    double value[256];
  };
  // floor(log2 |x|) of a nonzero finite x.
  static int Lead(double x) {
    int e = 0;
    std::frexp(x, &e);
    return e - 1;
  }
  int CodeExponent(uint8_t code) const {
    const int e = (code >> 3) & 15;
    if (e != 0) return e - 7;
    return subnormal_true_exponent ? Lead(qc::E4m3ToFloat(code)) : -6;
  }

  // One k32 step over a[0..31] and b[0..31] (e4m3 codes, k order) onto c.
  float Step(const uint8_t* a, const uint8_t* b, float c) const {
    int emax = 0;
    bool any = false;
    static const Table table = [] {
      Table t;
      for (int i = 0; i < 256; ++i) t.value[i] = qc::E4m3ToFloat(static_cast<uint8_t>(i));
      return t;
    }();
    double prod[32];
    for (int k = 0; k < 32; ++k) {
      prod[k] = table.value[a[k]] * table.value[b[k]];
      if (prod[k] == 0.0) continue;
      const int e = CodeExponent(a[k]) + CodeExponent(b[k]);
      emax = any ? (e > emax ? e : emax) : e;
      any = true;
    }
    if (c != 0.0f) {
      const int e = Lead(c);
      emax = any ? (e > emax ? e : emax) : e;
      any = true;
    }
    if (!any) return c;
    // Each term over the grid 2^(emax - bits) is exact in a double and below 2^(bits + 2).
    const int g = emax - fraction_bits;
    int64_t sum = static_cast<int64_t>(std::trunc(std::ldexp(static_cast<double>(c), -g)));
    for (int k = 0; k < 32; ++k) sum += static_cast<int64_t>(std::trunc(std::ldexp(prod[k], -g)));
    if (sum == 0) return 0.0f;
    double d = std::ldexp(static_cast<double>(sum), g);
    const int lead = Lead(d);
    const int top = cut_at_own_lead ? lead : (lead > emax ? lead : emax);
    d = std::ldexp(std::trunc(std::ldexp(d, fraction_bits - top)), top - fraction_bits);
    return static_cast<float>(d);  // at most 14 significant bits: exact
  }

  // k / 32 chained steps from c = 0 (k a multiple of 32).
  float Chain(const uint8_t* a, const uint8_t* b, int k) const {
    float c = 0.0f;
    for (int k0 = 0; k0 < k; k0 += 32) c = Step(a + k0, b + k0, c);
    return c;
  }
};

// The FP8-instruction linear y = x w^T on codes and scales. k is cut into slices of SliceCols
// columns (from the first; the decode kernels' split of k, fixed by the format alone), each summed
// from zero and added to the total in slice order (the first as it is). Within a slice, per
// promotion unit in k order: weights with 128-column scale blocks (FP8's 128 x 128; FP4 as the
// mode takes it, re-expressed per row and 128-column block: io::QuantizedToMma): r = the 128
// columns' four chained steps from zero; weights with 1 x 32 scale groups (FP4 as stored, its e2m1
// values as e4m3 codes; the benches' first FP4 forms, no longer the mode's): r = one step per
// group; then acc = fmaf(r, s_w * s_x, acc), s_x the token's act_quant scale of the columns'
// 128-block. k must be a multiple of 32 (a last, shorter 128-block chains what it has).
constexpr int SliceCols(bool fp4) { return fp4 ? 256 : 512; }

// A row-major [rows, k] operand as e4m3 codes and block scales: element (r, c) is
// E4m3(e4m3[r * k + c]) * scale[(r / br) * ceil(k / bc) + c / bc]. Activations: br 1, bc 128
// (act_quant); FP8 weights: 128 x 128; FP4 weights: 1 x 128 (re-expressed) or 1 x 32 (as stored).
struct Operand {
  const uint8_t* e4m3 = nullptr;
  const float* scale = nullptr;
  int64_t k = 0;
  int br = 1, bc = 128;
  const uint8_t* Row(int64_t r) const { return e4m3 + r * k; }
  float Scale(int64_t r, int64_t c) const { return scale[(r / br) * ((k + bc - 1) / bc) + c / bc]; }
};

// y[i, j] of x [m, k] (activations) and w [n, k] (weights; w.bc == 32: FP4 by group).
inline float Dot(const Operand& x, int64_t i, const Operand& w, int64_t j,
                 const WgmmaFp8Model& model = {}) {
  const bool fp4 = w.bc == 32;
  const int64_t k = x.k, slice = SliceCols(fp4), unit = fp4 ? 32 : 128;
  const uint8_t *xr = x.Row(i), *wr = w.Row(j);
  float total = 0.0f;
  for (int64_t c0 = 0; c0 < k; c0 += slice) {
    float acc = 0.0f;
    for (int64_t u = c0; u < std::min(k, c0 + slice); u += unit) {
      const int len = static_cast<int>(std::min(unit, k - u));
      const float r = model.Chain(xr + u, wr + u, len);
      acc = std::fmaf(r, w.Scale(j, u) * x.Scale(i, u), acc);
    }
    total = c0 == 0 ? acc : total + acc;
  }
  return total;
}

}  // namespace dsinfer::backend::fp8mma
