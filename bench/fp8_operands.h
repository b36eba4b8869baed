// Host side of the FP8-instruction benches (bench_fp8_gemm.cu, bench_fp8_gemv.cu, and in part
// probe_fp8_mma_bits.cu, bench_fp8_mma_error.cc): random activations quantized as act_quant does
// and weights in the official FP8 / FP4 formats, as codes, e4m3 codes and scales; the linear's
// reference through the wgmma model (wgmma_fp8_model.h); a parallel loop; a list flag's parser.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/quant_codec.h"
#include "wgmma_fp8_model.h"

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

// "a,b,c" -> {a, b, c} (an entry that is not a number: 0, for the caller to refuse).
inline std::vector<int> IntList(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// Quantized operands: the codes the kernel reads (FP4 weights: e2m1 pairs), each element's e4m3
// code (what the instruction multiplies; the model's input) and the scales.
struct Operand {
  std::vector<uint8_t> code;  // as uploaded
  std::vector<uint8_t> e4m3;  // [rows][k]
  std::vector<float> scale;   // x: [m][k / 128]; FP8 w: [n / 128][k / 128]; FP4 w: [n][k / 32]
};

inline Operand QuantizeActivations(int m, int k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Operand o;
  o.code.resize(static_cast<size_t>(m) * k);
  o.scale.resize(static_cast<size_t>(m) * (k / 128));
  std::vector<float> row(k);
  for (int i = 0; i < m; ++i) {
    for (float& v : row) v = normal(rng);
    for (int b = 0; b < k / 128; ++b) {
      float amax = 0.0f;
      for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(row[b * 128 + c]));
      const float s = qc::ScaleOfByte(qc::Kind::kFp8Pow2, qc::ScaleByte(qc::Kind::kFp8Pow2, amax));
      o.scale[static_cast<size_t>(i) * (k / 128) + b] = s;
      for (int c = 0; c < 128; ++c)
        o.code[static_cast<size_t>(i) * k + b * 128 + c] =
            qc::Code(qc::Kind::kFp8Pow2, row[b * 128 + c], s);
    }
  }
  o.e4m3 = o.code;
  return o;
}

// Weights as the checkpoints hold them: FP8 with a scale per 128 x 128 block, or FP4 (the routed
// experts) with a power-of-two scale per 32 columns of a row.
inline Operand QuantizeWeights(int n, int k, bool fp4, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = normal(rng);
  Operand o;
  o.e4m3.resize(w.size());
  const int br = fp4 ? 1 : 128, bc = fp4 ? 32 : 128;
  const qc::Kind kind = fp4 ? qc::Kind::kFp4Pow2 : qc::Kind::kFp8Pow2;
  o.scale.resize(static_cast<size_t>(n / br) * (k / bc));
  if (fp4) o.code.assign(w.size() / 2, 0);
  for (int rb = 0; rb < n / br; ++rb) {
    for (int cb = 0; cb < k / bc; ++cb) {
      float amax = 0.0f;
      for (int r = 0; r < br; ++r)
        for (int c = 0; c < bc; ++c)
          amax = std::max(amax, std::fabs(w[static_cast<size_t>(rb * br + r) * k + cb * bc + c]));
      const float s = qc::ScaleOfByte(kind, qc::ScaleByte(kind, amax));
      o.scale[static_cast<size_t>(rb) * (k / bc) + cb] = s;
      for (int r = 0; r < br; ++r) {
        for (int c = 0; c < bc; ++c) {
          const size_t i = static_cast<size_t>(rb * br + r) * k + cb * bc + c;
          const uint8_t code = qc::Code(kind, w[i], s);
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

// The FP8-instruction linear's y[i, j] on the CPU through the model: per k slice of
// `slice_cols` columns (from the first; one slice: slice_cols = k), per 128-column block, FP8: r =
// four chained steps from zero, acc = fmaf(r, s_w * s_x, acc); FP4: per 32-column group r = one
// step, acc = fmaf(r, s_g * s_x, acc); the slices' sums added in slice order (the first as it is).
inline float ModelElement(const Operand& x, const Operand& w, int k, bool fp4, int i, int j,
                          int slice_cols) {
  const probe::WgmmaFp8Model model;
  const int nblk = k / 128;
  const uint8_t* xr = &x.e4m3[static_cast<size_t>(i) * k];
  const uint8_t* wr = &w.e4m3[static_cast<size_t>(j) * k];
  float total = 0.0f;
  for (int c0 = 0; c0 < k; c0 += slice_cols) {
    float acc = 0.0f;
    for (int b = c0 / 128; b < (c0 + slice_cols) / 128; ++b) {
      const float sx = x.scale[static_cast<size_t>(i) * nblk + b];
      if (fp4) {
        for (int gi = 4 * b; gi < 4 * b + 4; ++gi) {
          const float r = model.Step(xr + 32 * gi, wr + 32 * gi, 0.0f);
          acc = std::fmaf(r, w.scale[static_cast<size_t>(j) * (k / 32) + gi] * sx, acc);
        }
      } else {
        const float r = model.Chain(xr + 128 * b, wr + 128 * b, 128);
        acc = std::fmaf(r, w.scale[static_cast<size_t>(j / 128) * nblk + b] * sx, acc);
      }
    }
    total = c0 == 0 ? acc : total + acc;
  }
  return total;
}

}  // namespace fp8bench
