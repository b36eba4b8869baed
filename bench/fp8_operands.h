// Host side of the FP8-instruction benches (bench_fp8_gemm.cu, bench_fp8_gemv.cu, and in part
// probe_fp8_mma_bits.cu, bench_fp8_mma_error.cc): random activations quantized as act_quant does
// and weights in the official FP8 / FP4 formats, as codes, e4m3 codes and scales; the linear's
// reference (backend/wgmma_fp8.h); a parallel loop.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "backend/quant_codec.h"
#include "backend/wgmma_fp8.h"

namespace fp8bench {

namespace qc = dsinfer::backend::qc;

// fn(i) for i in [0, count), spread over the host's threads (i, i + threads, ...).
template <typename F>
void ParallelFor(int64_t count, F&& fn) {
  const int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t i = w; i < count; i += workers) fn(i);
    });
  for (std::thread& t : pool) t.join();
}

// A [rows, k] matrix quantized in blocks of br rows x bc columns, each with a power-of-two scale
// from its absolute maximum (qc::ScaleByte of `kind`): each element's e4m3 code (what the FP8
// instruction multiplies: e2m1 values are e4m3 values; the model's input), the codes as a kernel
// reads them (FP8: those; FP4: the e2m1 codes two a byte, the even column in the low nibble) and
// the blocks' scales.
struct Operand {
  int rows = 0, k = 0, br = 1, bc = 1;
  std::vector<uint8_t> code;  // as uploaded
  std::vector<uint8_t> e4m3;  // [rows][k]
  std::vector<float> scale;   // [rows / br][k / bc] (a last partial block counts as one)
  float Scale(int r, int c) const {
    return scale[static_cast<size_t>(r / br) * ((k + bc - 1) / bc) + c / bc];
  }
  double Value(int r, int c) const {
    return static_cast<double>(qc::E4m3ToFloat(e4m3[static_cast<size_t>(r) * k + c])) * Scale(r, c);
  }
};

inline Operand Quantize(const std::vector<float>& a, int rows, int k, int br, int bc,
                        qc::Kind kind) {
  const bool fp4 = kind != qc::Kind::kFp8Pow2;
  Operand o;
  o.rows = rows;
  o.k = k;
  o.br = br;
  o.bc = bc;
  o.e4m3.resize(a.size());
  o.scale.resize(static_cast<size_t>((rows + br - 1) / br) * ((k + bc - 1) / bc));
  if (fp4) o.code.assign((a.size() + 1) / 2, 0);
  for (int r0 = 0; r0 < rows; r0 += br) {
    for (int c0 = 0; c0 < k; c0 += bc) {
      float amax = 0.0f;
      for (int r = r0; r < std::min(rows, r0 + br); ++r)
        for (int c = c0; c < std::min(k, c0 + bc); ++c)
          amax = std::max(amax, std::fabs(a[static_cast<size_t>(r) * k + c]));
      const float s = qc::ScaleOfByte(kind, qc::ScaleByte(kind, amax));
      o.scale[static_cast<size_t>(r0 / br) * ((k + bc - 1) / bc) + c0 / bc] = s;
      for (int r = r0; r < std::min(rows, r0 + br); ++r) {
        for (int c = c0; c < std::min(k, c0 + bc); ++c) {
          const size_t i = static_cast<size_t>(r) * k + c;
          const uint8_t code = qc::Code(kind, a[i], s);
          if (fp4) {
            o.code[i / 2] |= static_cast<uint8_t>(code << (4 * (i % 2)));
            o.e4m3[i] = qc::FloatToE4m3(qc::E2m1Value(code));
          } else {
            o.e4m3[i] = code;
          }
        }
      }
    }
  }
  if (!fp4) o.code = o.e4m3;
  return o;
}

// Activations as act_quant leaves them (unit normals; a scale per 128 columns of a row).
inline Operand QuantizeActivations(int m, int k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m) * k);
  for (float& v : x) v = normal(rng);
  return Quantize(x, m, k, 1, 128, qc::Kind::kFp8Pow2);
}

// Weights as the checkpoints hold them: FP8 with a scale per 128 x 128 block, or FP4 (the routed
// experts) with a power-of-two scale per 32 columns of a row.
inline Operand QuantizeWeights(int n, int k, bool fp4, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = normal(rng);
  return fp4 ? Quantize(w, n, k, 1, 32, qc::Kind::kFp4Pow2)
             : Quantize(w, n, k, 128, 128, qc::Kind::kFp8Pow2);
}

// The FP8-instruction linear's y[i, j] on the CPU (backend/wgmma_fp8.h's Dot: the CPU reference).
inline float ModelElement(const Operand& x, const Operand& w, int i, int j) {
  namespace fm = dsinfer::backend::fp8mma;
  const fm::Operand xo{x.e4m3.data(), x.scale.data(), x.k, x.br, x.bc};
  const fm::Operand wo{w.e4m3.data(), w.scale.data(), w.k, w.br, w.bc};
  return fm::Dot(xo, i, wo, j);
}

}  // namespace fp8bench
