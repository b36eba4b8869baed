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
//          per 32-column group one step from zero, acc = fmaf(r, s_g * s_x, acc) (the official
//          FP4 kernel's order; bench_fp8_gemv's numerics but for its k slices, whose fp32 sums
//          change little).
//          `--promote 64`: FP8 chains of two steps (today's 64-column pairs).
//   block: (FP4 only) the mode's FP4 since session 41, in FP8's form: per row and 128-column
//          block the scale 2^e_max of its groups' largest, each group's codes times
//          2^(e_group - e_max) as e4m3 (E2M1ToE4M3Shifted), four steps chained, one promotion.
//          `--group-spread S` draws each weight group's values times 2^-U{0..S} (wider spans of
//          a block's group scales than the normal draw's one or two binades).
// It reports, over the m x n outputs and relative to the rms of the exact outputs, the median,
// p99 and max of |mma - exact| (what the instructions add) and of |exact - true| (what act_quant
// and the weight format already cost, on every path today), and their ratio.
//   bench_fp8_mma_error [--m 32] [--n 256] [--k 1024,2048,4096,8192] [--outliers 0.01]
//                       [--outlier-scale 30] [--promote 128|64] [--group-spread 0] [--seed 1]
//   ->  one JSON line per (format, form, k)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/quant_codec.h"
#include "backend/wgmma_fp8.h"
#include "base/dtype.h"
#include "bench_flags.h"
#include "fp8_operands.h"  // Quantize, ParallelFor

namespace qc = dsinfer::backend::qc;

namespace {

struct Options {
  int m = 32, n = 256, promote = 128;
  std::vector<int> ks = {1024, 2048, 4096, 8192};
  double outliers = 0.01, outlier_scale = 30.0;
  uint32_t seed = 1;
  int group_spread = 0;
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
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = normal(rng) * 0.02f;
    if (fp4 && o.group_spread > 0 && i % 32 == 0) {  // a new group: its spread
      const float f = std::ldexp(1.0f, -static_cast<int>(rng() % (o.group_spread + 1)));
      for (size_t j = i; j < std::min(w.size(), i + 32); ++j) w[j] = normal(rng) * 0.02f * f;
      i += 31;
    }
  }
  const fp8bench::Operand xq = fp8bench::Quantize(x, o.m, k, 1, 128, qc::Kind::kFp8Pow2);
  const fp8bench::Operand wq = fp4 ? fp8bench::Quantize(w, o.n, k, 1, 32, qc::Kind::kFp4Pow2)
                                   : fp8bench::Quantize(w, o.n, k, 128, 128, qc::Kind::kFp8Pow2);
  const dsinfer::backend::fp8mma::WgmmaFp8Model model;
  const size_t outs = static_cast<size_t>(o.m) * o.n;
  std::vector<double> y_true(outs), y_exact(outs), y_mma(outs), y_block(outs);
  // FP4 in FP8's form: each row's codes shifted per 128-column block, the block's scale 2^e_max.
  std::vector<uint8_t> shifted;
  std::vector<float> block_scale;
  if (fp4) {
    shifted.resize(wq.e4m3.size());
    block_scale.resize(static_cast<size_t>(o.n) * (k / 128));
    for (int j = 0; j < o.n; ++j)
      for (int b = 0; b < k; b += 128) {
        int e_max = -1000;
        for (int g = b; g < b + 128; g += 32) e_max = std::max(e_max, std::ilogb(wq.Scale(j, g)));
        block_scale[static_cast<size_t>(j) * (k / 128) + b / 128] = std::ldexp(1.0f, e_max);
        for (int c = b; c < b + 128; ++c) {
          const int d = e_max - std::ilogb(wq.Scale(j, c));
          const size_t i = static_cast<size_t>(j) * k + c;
          const uint8_t nibble = (wq.code[i / 2] >> (4 * (i % 2))) & 15u;  // (as io's reads)
          shifted[i] = dsinfer::E2M1ToE4M3Shifted(nibble, d);
        }
      }
  }
  fp8bench::ParallelFor(static_cast<int64_t>(outs), [&](int64_t e) {
    const int i = static_cast<int>(e / o.n), j = static_cast<int>(e % o.n);
    const size_t xo = static_cast<size_t>(i) * k, wo = static_cast<size_t>(j) * k;
    double t = 0.0, ex = 0.0;
    for (int c = 0; c < k; ++c) {
      t += static_cast<double>(x[xo + c]) * w[wo + c];
      ex += xq.Value(i, c) * wq.Value(j, c);
    }
    float acc = 0.0f, block = 0.0f;
    for (int b = 0; b < k; b += 128) {
      const float sx = xq.Scale(i, b);
      if (fp4) {
        const float r = model.Chain(&xq.e4m3[xo + b], &shifted[wo + b], 128);
        block = std::fmaf(r, block_scale[static_cast<size_t>(j) * (k / 128) + b / 128] * sx, block);
      }
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
    y_block[e] = block;
  });
  double ss = 0.0;
  for (double v : y_exact) ss += v * v;
  const double rms = std::sqrt(ss / static_cast<double>(outs));
  std::vector<double> e_quant(outs);
  for (size_t e = 0; e < outs; ++e) e_quant[e] = std::fabs(y_exact[e] - y_true[e]) / rms;
  const Stats sq = Summarize(e_quant);
  // One line per form: FP8 (or FP4 by group), and FP4's block form.
  auto report = [&](const std::vector<double>& y, const char* form, int promote) {
    std::vector<double> err(outs);
    for (size_t e = 0; e < outs; ++e) err[e] = std::fabs(y[e] - y_exact[e]) / rms;
    const Stats sm = Summarize(err);
    std::printf(
        "{\"bench\": \"fp8_mma_error\", \"format\": \"%s\", \"form\": \"%s\", \"m\": %d, "
        "\"n\": %d, \"k\": %d, \"promote\": %d, \"group_spread\": %d, "
        "\"mma_vs_exact_median\": %.3g, \"mma_vs_exact_p99\": %.3g, \"mma_vs_exact_max\": %.3g, "
        "\"quant_vs_true_median\": %.3g, \"quant_vs_true_p99\": %.3g, \"quant_vs_true_max\": "
        "%.3g, \"median_ratio\": %.3g}\n",
        fp4 ? "fp4" : "fp8", form, o.m, o.n, k, promote, fp4 ? o.group_spread : 0, sm.median,
        sm.p99, sm.max, sq.median, sq.p99, sq.max, sq.median > 0 ? sm.median / sq.median : 0.0);
  };
  report(y_mma, fp4 ? "group" : "block", fp4 ? 32 : o.promote);
  if (fp4) report(y_block, "block", 128);
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
    } else if (a == "--group-spread" && has_value) {
      o.group_spread = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      o.seed = static_cast<uint32_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "bench_fp8_mma_error: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  bool ok = o.m > 0 && o.n > 0 && (o.promote == 64 || o.promote == 128) && !o.ks.empty() &&
            o.group_spread >= 0 && o.group_spread <= 20;
  for (int k : o.ks) ok = ok && k > 0 && k % 128 == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "bench_fp8_mma_error: --m and --n positive, --k multiples of 128, --promote 64 or "
                 "128, --group-spread 0..20\n");
    return 2;
  }
  for (bool fp4 : {false, true})
    for (int k : o.ks) Run(o, fp4, k);
  return 0;
}
