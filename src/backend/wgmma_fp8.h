// What Hopper's FP8 warpgroup MMA computes (wgmma m64nNk32 .f32.e4m3.e4m3), as a CPU function:
// a model fitted to an H200's outputs, the precondition of any FP8-instruction numerics mode
// whose CPU reference adopts the instruction's rounding (issue 27; docs/perf.md, session 38).
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
// Fitted (session 38) to the 27 elements probe_fp8_mma_bits printed in session 31 (problem 0, row
// 0, columns 0-2 of each class x 1 / 2 / 4 steps; tests/data/wgmma_fp8_h200_s31.json): all 27
// match, as they do with either variant flag (those elements do not tell them apart); 12 fraction
// bits match 4, 14 match 8. The probe checks every element against it (wgmma_vs_model).
//
// By this model an element depends only on its own row of A and column of B, not on N, the
// other columns or the tile: a kernel chaining these steps in a fixed k order would be
// batch-invariant (the probe's fact 4 checks that directly).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/quant_codec.h"

namespace probe {

// Exact decodes of the narrow formats: e4m3 through the codec the model's kernels share
// (backend/quant_codec.h; 0x7f / 0xff are NaN); e2m1 keeping the sign of a negative zero (the
// probe draws its e4m3 code).
inline double DecodeE4m3(uint8_t b) { return dsinfer::backend::qc::E4m3ToFloat(b); }
inline double DecodeE2m1(uint8_t b) {
  static const double kV[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (b & 8) ? -kV[b & 7] : kV[b & 7];
}

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
    return subnormal_true_exponent ? Lead(DecodeE4m3(code)) : -6;
  }

  // One k32 step over a[0..31] and b[0..31] (e4m3 codes, k order) onto c.
  float Step(const uint8_t* a, const uint8_t* b, float c) const {
    int emax = 0;
    bool any = false;
    static const Table table = [] {
      Table t;
      for (int i = 0; i < 256; ++i) t.value[i] = DecodeE4m3(static_cast<uint8_t>(i));
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

}  // namespace probe
