// What Hopper's FP8 instructions would cost the FP8 / FP4 linears in accuracy (issue 27's
// FP8-instruction numerics mode), on the CPU through backend/wgmma_fp8.h.
//
// A linear y = x · Wᵀ with x quantized as act_quant does (e4m3, a power-of-two scale per 128
// columns; spec §2.12) and W in the official formats: FP8 (e4m3, one power-of-two scale per
// 128 x 128 block) or FP4 (e2m1, one power-of-two scale per 32 columns of a row, the routed
// experts). Three results per element:
//   true:  x · W with neither quantized (double) — what the model means;
//   exact: the quantized operands' exact sum (double) — today's f16 chains keep fp32 accuracy of
//          it (docs/perf.md), so this stands for today's numerics;
//   mma:   the FP8-instruction form: per 128-column block (FP8) four wgmma k32 steps chained from
//          zero, then acc = fmaf(r, s_w * s_x, acc) (DeepGEMM's promotion every 128 k); or (FP4)
//          per 32-column group one step from zero, acc = fmaf(r, s_g * s_x, acc) (the numerics
//          of bench_fp8_gemm / bench_fp8_gemv but for their k slices, whose fp32 sums change
//          little).
//          `--promote 64`: FP8 chains of two steps (today's 64-column pairs).
// It reports, over the m x n outputs and relative to the rms of the exact outputs, the median,
// p99 and max of |mma - exact| (what the instructions add) and of |exact - true| (what act_quant
// and the weight format already cost, on every path today), and their ratio.
//   bench_fp8_mma_error [--m 32] [--n 256] [--k 1024,2048,4096,8192] [--outliers 0.01]
//                       [--outlier-scale 30] [--promote 128|64] [--seed 1]
//   ->  one JSON line per (format, k)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/quant_codec.h"
#include "backend/wgmma_fp8.h"
#include "bench_flags.h"
#include "fp8_operands.h"  // Quantize, ParallelFor

namespace qc = dsinfer::backend::qc;

namespace {

struct Options {
  int m = 32, n = 256, promote = 128;
  std::vector<int> ks = {1024, 2048, 4096, 8192};
  double outliers = 0.01, outlier_scale = 30.0;
  uint32_t seed = 1;
};

struct Stats {
  double median = 0, p99 = 0, max = 0;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  if (v.empty()) return s;
  s.median = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  s.max = v.back();
  return s;
}

void Run(const Options& o, bool fp4, int k) {
  std::mt19937 rng(o.seed * 7919u + static_cast<uint32_t>(k) + (fp4 ? 1u : 0u));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  // Activations: unit normals with a few outlier channels (as transformer activations have).
  std::vector<float> x(static_cast<size_t>(o.m) * k), w(static_cast<size_t>(o.n) * k);
  std::vector<float> channel(k, 1.0f);
  for (float& c : channel) c = unit(rng) < o.outliers ? static_cast<float>(o.outlier_scale) : 1.0f;
  for (int r = 0; r < o.m; ++r)
    for (int c = 0; c < k; ++c) x[static_cast<size_t>(r) * k + c] = normal(rng) * channel[c];
  for (float& v : w) v = normal(rng) * 0.02f;
  const fp8bench::Operand xq = fp8bench::Quantize(x, o.m, k, 1, 128, qc::Kind::kFp8Pow2);
  const fp8bench::Operand wq = fp4 ? fp8bench::Quantize(w, o.n, k, 1, 32, qc::Kind::kFp4Pow2)
                                   : fp8bench::Quantize(w, o.n, k, 128, 128, qc::Kind::kFp8Pow2);
  const dsinfer::backend::fp8mma::WgmmaFp8Model model;
  const size_t outs = static_cast<size_t>(o.m) * o.n;
  std::vector<double> y_true(outs), y_exact(outs), y_mma(outs);
  fp8bench::ParallelFor(static_cast<int64_t>(outs), [&](int64_t e) {
    const int i = static_cast<int>(e / o.n), j = static_cast<int>(e % o.n);
    const size_t xo = static_cast<size_t>(i) * k, wo = static_cast<size_t>(j) * k;
    double t = 0.0, ex = 0.0;
    for (int c = 0; c < k; ++c) {
      t += static_cast<double>(x[xo + c]) * w[wo + c];
      ex += xq.Value(i, c) * wq.Value(j, c);
    }
    float acc = 0.0f;
    for (int b = 0; b < k; b += 128) {
      const float sx = xq.Scale(i, b);
      if (fp4) {
        for (int g = b; g < std::min(k, b + 128); g += 32) {
          const float r = model.Step(&xq.e4m3[xo + g], &wq.e4m3[wo + g], 0.0f);
          acc = std::fmaf(r, wq.Scale(j, g) * sx, acc);
        }
      } else {
        for (int p = b; p < std::min(k, b + 128); p += o.promote) {
          const float r = model.Chain(&xq.e4m3[xo + p], &wq.e4m3[wo + p], o.promote);
          acc = std::fmaf(r, wq.Scale(j, p) * sx, acc);
        }
      }
    }
    y_true[e] = t;
    y_exact[e] = ex;
    y_mma[e] = acc;
  });
  double ss = 0.0;
  for (double v : y_exact) ss += v * v;
  const double rms = std::sqrt(ss / static_cast<double>(outs));
  std::vector<double> e_mma(outs), e_quant(outs);
  for (size_t e = 0; e < outs; ++e) {
    e_mma[e] = std::fabs(y_mma[e] - y_exact[e]) / rms;
    e_quant[e] = std::fabs(y_exact[e] - y_true[e]) / rms;
  }
  const Stats sm = Summarize(e_mma), sq = Summarize(e_quant);
  std::printf(
      "{\"bench\": \"fp8_mma_error\", \"format\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, "
      "\"promote\": %d, \"mma_vs_exact_median\": %.3g, \"mma_vs_exact_p99\": %.3g, "
      "\"mma_vs_exact_max\": %.3g, \"quant_vs_true_median\": %.3g, \"quant_vs_true_p99\": %.3g, "
      "\"quant_vs_true_max\": %.3g, \"median_ratio\": %.3g}\n",
      fp4 ? "fp4" : "fp8", o.m, o.n, k, fp4 ? 32 : o.promote, sm.median, sm.p99, sm.max, sq.median,
      sq.p99, sq.max, sq.median > 0 ? sm.median / sq.median : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--m" && has_value) {
      o.m = std::atoi(argv[++i]);
    } else if (a == "--n" && has_value) {
      o.n = std::atoi(argv[++i]);
    } else if (a == "--k" && has_value) {
      o.ks.clear();
      for (int64_t v : dsinfer::bench::ParseIntList(argv[++i])) o.ks.push_back(static_cast<int>(v));
    } else if (a == "--outliers" && has_value) {
      o.outliers = std::atof(argv[++i]);
    } else if (a == "--outlier-scale" && has_value) {
      o.outlier_scale = std::atof(argv[++i]);
    } else if (a == "--promote" && has_value) {
      o.promote = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      o.seed = static_cast<uint32_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "bench_fp8_mma_error: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  bool ok = o.m > 0 && o.n > 0 && (o.promote == 64 || o.promote == 128) && !o.ks.empty();
  for (int k : o.ks) ok = ok && k > 0 && k % 128 == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "bench_fp8_mma_error: --m and --n positive, --k multiples of 128, --promote 64 or "
                 "128\n");
    return 2;
  }
  for (bool fp4 : {false, true})
    for (int k : o.ks) Run(o, fp4, k);
  return 0;
}
