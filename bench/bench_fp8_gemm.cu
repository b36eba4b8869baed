// Benchmark (issue 27) of the FP8-instruction mode's linears as src runs them (`--fp8-mma`;
// backend/cuda/fp8mma_linear_sm90.cu): flash-l8's dense FP8 linears and its routed FP4 experts at
// prefill sizes, through LaunchMmaLinear / LaunchMmaExpertLinear as the CUDA model calls them
// (each launch act_quant's its fp32 input first, as in the model). The experts: `tokens` tokens,
// each routed to 6 of 256 experts drawn uniformly (about 192 pairs an expert at 8,192 tokens),
// every expert its own weights (1 GiB of FP4 codes per matrix kind), w1 reading the tokens' rows
// and w2 a row per pair. --balanced-routing instead gives token t the experts 6 t .. 6 t + 5
// (mod 256): every expert the same pairs (192 at 8,192 tokens), so no expert needs a second,
// partial token tile (the uniform draw gives about half of them one).
//
// Per shape: us per launch (CUDA-graph replay, as bench_qgemm times), TFLOP/s, the roofline (the
// larger of the FLOPs at the FP8 dense peak, 1,979 TFLOP/s on H100 / H200 SXM, and the bytes a
// launch must move, its weights, input and fp32 output, at the measured copy bandwidth) and the
// ratio to it, the kernel that ran, and the bitwise mismatches of a sample of outputs against the
// CPU reference (fp8mma::Dot of cpu::ActQuantCodes' codes and io::QuantizedToMma's operand: FP4 in
// FP8's form).
//
// First, on the host (alone with --host-check: no device needed): fp8mma.cuh's E2m1x4ToE4m3 with
// each shift's magnitude table against E2M1ToE4M3Shifted, for every 16-bit input and shift.
//   bench_fp8_gemm [--tokens 8192] [--only NAME] [--sample 1024] [--host-check]
//                  [--no-fp8mma-ws-experts] [--no-tma-experts] [--no-wide-experts]
//                  [--balanced-routing]
// Exit 0 if every sampled element matches, 1 if not, 2 without an sm_90 device or on bad flags.
// (Sessions 38-40's experiment kernels, a first form and a TMA form with FP4 promoted per
// 32-column group, were measured here and left when src took their designs: docs/perf.md.)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cuda/fp8mma.cuh"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/runtime.h"
#include "backend/wgmma_fp8.h"
#include "base/dtype.h"
#include "fp8_operands.h"  // ParallelFor
#include "gpu_bench.h"     // MedianGraphUs, CopyGBs
#include "io/quant.h"
#include "io/safetensors.h"
#include "probe_bits.h"

namespace {

namespace cu = dsinfer::backend::cuda;
namespace cpu = dsinfer::backend::cpu;
namespace fm = dsinfer::backend::fp8mma;
namespace io = dsinfer::io;
using dsinfer::DType;

constexpr int kGraphLaunches = 5;  // launches per timed CUDA graph (bench_qgemm's count)
constexpr double kFp8PeakTflops = 1979.0;
constexpr int kExperts = 256, kTopK = 6;

// Every e2m1 input and shift through the device's conversion (as the kernels' table holds it).
bool HostCheck() {
  int bad = 0;
  for (int d = 0; d < 16; ++d) {
    const uint2 tab = cu::fp8mma::E2m1ShiftTable(d);
    for (uint32_t v = 0; v < 65536; ++v) {
      const uint32_t got = cu::fp8mma::E2m1x4ToE4m3(v, tab.x, tab.y);
      for (int i = 0; i < 4; ++i)
        bad += static_cast<uint8_t>(got >> (8 * i)) !=
               dsinfer::E2M1ToE4M3Shifted(static_cast<uint8_t>((v >> (4 * i)) & 15u), d);
    }
  }
  if (bad != 0) std::printf("host check: %d shifted e2m1 -> e4m3 conversions wrong\n", bad);
  return bad == 0;
}

// A weight in the mode's layout: the checkpoint's bytes and scales on the host (FP8: e4m3 codes
// [n][k], fp32 scale per 128 x 128 block [n / 128][k / 128]; FP4: e2m1 pairs [n][k / 2], ue8m0
// group bytes [n][k / 32], a row's groups within 4 binades), the device copy (WeightRef::mma).
struct HostWeight {
  bool fp4 = false;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> data, groups;
  std::vector<float> block_scale;
  HostWeight(bool fp4_, int64_t n_, int64_t k_, uint64_t seed) : fp4(fp4_), n(n_), k(k_) {
    std::mt19937_64 rng(seed);
    data.resize(static_cast<size_t>(fp4 ? n * k / 2 : n * k));
    for (size_t i = 0; i < data.size(); i += 8) {
      uint64_t r = rng();
      for (size_t j = i; j < std::min(data.size(), i + 8); ++j, r >>= 8) {
        uint8_t b = static_cast<uint8_t>(r);
        if (!fp4 && (b & 0x7f) == 0x7f) b = 0x7e;  // (no NaN codes)
        data[j] = b;
      }
    }
    if (fp4) {
      groups.resize(static_cast<size_t>(n * (k / 32)));
      for (auto& g : groups) g = static_cast<uint8_t>(116 + rng() % 5);
    } else {
      block_scale.resize(static_cast<size_t>(((n + 127) / 128) * ((k + 127) / 128)));
      for (auto& s : block_scale) s = std::ldexp(1.0f, -static_cast<int>(6 + rng() % 5));
    }
  }
  // The device copy: data and packed scales (into *keep), as a WeightRef.
  cu::WeightRef Upload(std::vector<cu::DeviceBuffer>* keep) const {
    std::vector<uint8_t> packed(static_cast<size_t>(cu::MmaScaleBytes(n, k)));
    if (fp4) {
      cu::PackMmaScalesFp4(groups.data(), n, k, packed.data());
    } else {
      const int64_t nb = (k + 127) / 128;
      std::vector<float> per_row(static_cast<size_t>(n * nb));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t b = 0; b < nb; ++b) per_row[r * nb + b] = block_scale[(r / 128) * nb + b];
      cu::PackMmaScalesFp8(per_row.data(), n, k, reinterpret_cast<float*>(packed.data()));
    }
    keep->push_back(dsinfer::bench::Upload(data));
    keep->push_back(dsinfer::bench::Upload(packed));
    cu::WeightRef w;
    w.format = fp4 ? cu::WeightFormat::kFp4 : cu::WeightFormat::kFp8;
    w.data = (*keep)[keep->size() - 2].get();
    w.scale = keep->back().get();
    w.scale_format = cu::ScaleFormat::kF32;
    w.n = n;
    w.k = k;
    w.block = 128;
    w.mma = true;
    return w;
  }
  // The CPU reference of output (x row, weight row j): the row's operand as the mode's CPU takes
  // it.
  float Reference(const float* x, int64_t j) const {
    std::vector<uint8_t> xc(static_cast<size_t>(k));
    std::vector<float> xs(static_cast<size_t>((k + 127) / 128));
    cpu::ActQuantCodes(x, k, xc.data(), xs.data());
    const fm::Operand xo{xc.data(), xs.data(), k, 1, 128};
    std::vector<uint8_t> wbytes, sbytes;
    dsinfer::StatusOr<io::MmaOperand> mo = [&] {
      if (fp4) {
        wbytes.assign(data.begin() + j * (k / 2), data.begin() + (j + 1) * (k / 2));
        sbytes.assign(groups.begin() + j * (k / 32), groups.begin() + (j + 1) * (k / 32));
        io::TensorView wv{"w", DType::kU8, {1, k / 2}, wbytes.data(), wbytes.size()};
        io::TensorView sv{"s", DType::kF8E8M0, {1, k / 32}, sbytes.data(), sbytes.size()};
        return io::QuantizedToMma(wv, &sv, {1, k}, 128);
      }
      io::MmaOperand o;  // FP8 as stored: the row's codes, its blocks' scales
      o.rows = 1;
      o.cols = k;
      o.bc = 128;
      o.e4m3.assign(data.begin() + j * k, data.begin() + (j + 1) * k);
      for (int64_t b = 0; b < (k + 127) / 128; ++b)
        o.scale.push_back(block_scale[(j / 128) * ((k + 127) / 128) + b]);
      return dsinfer::StatusOr<io::MmaOperand>(std::move(o));
    }();
    if (!mo.ok()) {
      std::fprintf(stderr, "reference operand: %s\n", mo.status().ToString().c_str());
      std::exit(1);
    }
    const fm::Operand wo{mo->e4m3.data(), mo->scale.data(), k, 1, mo->bc};
    return fm::Dot(xo, 0, wo, 0);
  }
};

struct Shape {
  const char* name;
  int64_t n, k;
  bool expert;    // routed FP4 experts (else dense FP8)
  int x_row_div;  // experts: pairs per input row (w1: the token's 6 pairs; w2: 1)
};

// The act_quant scratch a launch of `rows` input rows of `width` columns asks for (routed experts:
// `pairs` pairs over `slots` slots, the TMA-fed tile's gathered rows too).
struct Scratch {
  cu::DeviceBuffer q, s, part;
  cu::ActQuantScratch aq;
  Scratch(int64_t rows, int64_t width, int64_t pairs, int64_t slots)
      : q(cu::MmaExpertQuantBytes(rows, pairs, slots, width)),
        s(cu::MmaExpertScaleCount(rows, pairs, slots, width) * 4),
        part(int64_t{4} << 22) {
    aq.q = q.as<uint8_t>();
    aq.q_bytes = cu::MmaExpertQuantBytes(rows, pairs, slots, width);
    aq.s = s.as<float>();
    aq.s_count = cu::MmaExpertScaleCount(rows, pairs, slots, width);
    aq.part = part.as<float>();
    aq.part_count = int64_t{1} << 22;
  }
};

// The routing: each token's 6 distinct experts, the pairs (token * 6 + j) grouped by expert.
struct Routing {
  std::vector<int32_t> active, offsets{0}, pairs, expert_of;  // expert_of[pair]
  Routing(int64_t tokens, bool balanced, std::mt19937& rng) {
    std::vector<std::vector<int32_t>> by(kExperts);
    expert_of.resize(static_cast<size_t>(tokens * kTopK));
    for (int64_t t = 0; t < tokens; ++t) {
      int32_t chosen[kTopK];
      for (int j = 0; j < kTopK; ++j) {
        int32_t e;
        if (balanced) {
          e = static_cast<int32_t>((t * kTopK + j) % kExperts);
        } else {
          do e = static_cast<int32_t>(rng() % kExperts);
          while (std::find(chosen, chosen + j, e) != chosen + j);
        }
        chosen[j] = e;
        by[e].push_back(static_cast<int32_t>(t * kTopK + j));
        expert_of[t * kTopK + j] = e;
      }
    }
    for (int e = 0; e < kExperts; ++e) {
      if (by[e].empty()) continue;
      active.push_back(e);
      pairs.insert(pairs.end(), by[e].begin(), by[e].end());
      offsets.push_back(static_cast<int32_t>(pairs.size()));
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t m = 8192;
  int sample = 1024;
  bool host_only = false, balanced = false;
  std::string only;
  cu::KernelOptions kopt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokens" && has_value) {
      m = std::atoll(argv[++i]);
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--sample" && has_value) {
      sample = std::atoi(argv[++i]);
    } else if (a == "--host-check") {
      host_only = true;
    } else if (a == "--no-fp8mma-ws-experts") {
      kopt.fp8mma_ws_experts = false;
    } else if (a == "--no-tma-experts") {
      kopt.fp8mma_tma_experts = false;
    } else if (a == "--no-wide-experts") {
      kopt.fp8mma_wide_experts = false;
    } else if (a == "--balanced-routing") {
      balanced = true;
    } else {
      std::fprintf(stderr, "bench_fp8_gemm: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (m < 1 || sample < 0) {
    std::fprintf(stderr, "bench_fp8_gemm: --tokens positive, --sample >= 0\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (const int rc = probe::StartAfterHostCheck("fp8_gemm", HostCheck(), host_only, &prop); rc >= 0)
    return rc;
  cu::SetKernelOptions(kopt);
  cu::Stream st;
  const double copy_gbs = dsinfer::bench::CopyGBs(st.get());
  std::printf(
      "{\"bench\": \"fp8_gemm_setup\", \"device\": \"%s\", \"tokens\": %lld, "
      "\"copy_GBs\": %.0f, \"ws_experts\": %s}\n",
      prop.name, static_cast<long long>(m), copy_gbs, kopt.fp8mma_ws_experts ? "true" : "false");
  const Shape shapes[] = {
      {"wq_a", 1024, 4096, false, 0},      {"wq_b", 32768, 1024, false, 0},
      {"wkv", 512, 4096, false, 0},        {"idx_wq_b", 8192, 1024, false, 0},
      {"wo_b", 4096, 8192, false, 0},      {"shared_w1", 2048, 4096, false, 0},
      {"shared_w2", 4096, 2048, false, 0}, {"expert_w1", 2048, 4096, true, kTopK},
      {"expert_w2", 4096, 2048, true, 1}};
  std::mt19937 rng(20261205u);
  const Routing route(m, balanced, rng);
  {
    // The most pairs an expert has; the experts past one token tile of the FP4 experts' widest
    // default tile (fp8mma_experts_sm90.cu's wide tile), which take a second, partial one.
    constexpr int32_t kWideTileTokens = 192;
    int32_t most = 0, over = 0;
    for (size_t i = 0; i + 1 < route.offsets.size(); ++i) {
      const int32_t c = route.offsets[i + 1] - route.offsets[i];
      most = std::max(most, c);
      over += c > kWideTileTokens ? 1 : 0;
    }
    std::printf(
        "{\"bench\": \"fp8_gemm_routing\", \"balanced\": %s, \"experts\": %zu, "
        "\"most_pairs\": %d, \"experts_over_192\": %d}\n",
        balanced ? "true" : "false", route.active.size(), most, over);
  }
  const int64_t pairs = m * kTopK;
  bool all_ok = true;
  for (const Shape& sh : shapes) {
    if (!only.empty() && only != sh.name) continue;
    const int64_t rows = sh.expert ? (sh.x_row_div == 1 ? pairs : m) : m;  // input rows
    const int64_t out_rows = sh.expert ? pairs : m;
    std::vector<cu::DeviceBuffer> keep;
    std::vector<HostWeight> ws;
    const int nw = sh.expert ? kExperts : 1;
    ws.reserve(nw);
    for (int e = 0; e < nw; ++e) ws.emplace_back(sh.expert, sh.n, sh.k, 1000u * e + 7u);
    std::vector<cu::WeightRef> refs;
    for (const HostWeight& w : ws) refs.push_back(w.Upload(&keep));
    std::vector<float> x(static_cast<size_t>(rows * sh.k));
    {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (float& v : x) v = normal(rng);
    }
    cu::DeviceBuffer xd = dsinfer::bench::Upload(x);
    cu::DeviceBuffer yd(out_rows * sh.n * 4);
    Scratch scr(rows, sh.k, sh.expert ? pairs : 0, sh.expert ? kExperts : 0);
    std::vector<const void*> dptr, sptr;
    for (const cu::WeightRef& r : refs) {
      dptr.push_back(r.data);
      sptr.push_back(r.scale);
    }
    cu::DeviceBuffer dd = dsinfer::bench::Upload(dptr), sd = dsinfer::bench::Upload(sptr),
                     ad = dsinfer::bench::Upload(route.active),
                     nd = dsinfer::bench::Upload(
                         std::vector<int32_t>{static_cast<int32_t>(route.active.size())}),
                     od = dsinfer::bench::Upload(route.offsets),
                     pd = dsinfer::bench::Upload(route.pairs);
    const int64_t tma0 = cu::MmaTmaLaunches(), tile0 = cu::MmaTileLaunches(),
                  split0 = cu::MmaSplitLaunches(), ws0 = cu::MmaWsExpertLaunches(),
                  wstma0 = cu::MmaWsTmaExpertLaunches();
    auto launch = [&](int) {
      if (!sh.expert) {
        cu::LinearParams p;
        p.w = refs[0];
        p.aq = scr.aq;
        p.x = xd.as<float>();
        p.ldx = sh.k;
        p.m = m;
        p.y = yd.as<float>();
        p.ldy = sh.n;
        cu::LaunchLinear(p, st.get());
        return;
      }
      cu::ExpertLinearParams p;
      p.shape = refs[0];
      p.aq = scr.aq;
      p.data = reinterpret_cast<const void* const*>(dd.get());
      p.scale = reinterpret_cast<const void* const*>(sd.get());
      p.x = xd.as<float>();
      p.ldx = sh.k;
      p.x_row_div = sh.x_row_div;
      p.y = yd.as<float>();
      p.ldy = sh.n;
      p.active = ad.as<int32_t>();
      p.num_active = nd.as<int32_t>();
      p.offsets = od.as<int32_t>();
      p.pairs = pd.as<int32_t>();
      p.max_slots = kExperts;
      p.total_pairs = pairs;
      cu::LaunchExpertLinear(p, st.get());
    };
    launch(0);
    st.Synchronize();
    const char* kernel = cu::MmaWsTmaExpertLaunches() > wstma0 ? "ws_tma_experts"
                         : cu::MmaWsExpertLaunches() > ws0     ? "ws_experts"
                         : cu::MmaTmaLaunches() > tma0         ? "tma"
                         : cu::MmaSplitLaunches() > split0     ? "split"
                         : cu::MmaTileLaunches() > tile0       ? "tile"
                                                               : "none";
    const double us = dsinfer::bench::MedianGraphUs(launch, kGraphLaunches, st.get());
    std::vector<float> y(static_cast<size_t>(out_rows * sh.n));
    cu::CopyToHost(y.data(), yd.get(), y.size() * 4, st.get());
    st.Synchronize();
    // A sample of outputs against the CPU reference, over the host's threads.
    std::vector<std::pair<int64_t, int64_t>> picks(static_cast<size_t>(sample));
    for (auto& p : picks)
      p = {static_cast<int64_t>(rng() % out_rows), static_cast<int64_t>(rng() % sh.n)};
    std::vector<float> want(picks.size()), got(picks.size());
    fp8bench::ParallelFor(static_cast<int64_t>(picks.size()), [&](int64_t i) {
      const auto [r, j] = picks[i];  // output row r: pair r (experts) or token r
      const int64_t xrow = sh.expert ? r / sh.x_row_div : r;
      const HostWeight& w = ws[sh.expert ? route.expert_of[r] : 0];
      want[i] = w.Reference(x.data() + xrow * sh.k, j);
      got[i] = y[r * sh.n + j];
    });
    const int64_t mismatches =
        probe::TallyMismatches(got, want, false, 3, [&](size_t i) {
          std::printf("  %s: row %lld column %lld: %a vs reference %a\n", sh.name,
                      static_cast<long long>(picks[i].first),
                      static_cast<long long>(picks[i].second), got[i], want[i]);
        }).mismatches;
    all_ok &= mismatches == 0;
    const double flops = 2.0 * static_cast<double>(out_rows) * sh.n * sh.k;
    const double bytes = static_cast<double>(nw) * (sh.expert ? sh.n * sh.k / 2 : sh.n * sh.k) +
                         4.0 * rows * sh.k + 4.0 * out_rows * sh.n;
    const double bound_us =
        std::max(flops / (kFp8PeakTflops * 1e12), bytes / (copy_gbs * 1e9)) * 1e6;
    std::printf(
        "{\"bench\": \"fp8_gemm\", \"shape\": \"%s\", \"format\": \"%s\", \"kernel\": \"%s\", "
        "\"tokens\": %lld, \"rows\": %lld, \"n\": %lld, \"k\": %lld, \"us\": %.1f, "
        "\"tflops\": %.1f, \"bound_us\": %.1f, \"ratio_to_bound\": %.2f, \"sampled\": %d, "
        "\"mismatches\": %lld}\n",
        sh.name, sh.expert ? "fp4" : "fp8", kernel, static_cast<long long>(m),
        static_cast<long long>(out_rows), static_cast<long long>(sh.n),
        static_cast<long long>(sh.k), us, flops / (us * 1e-6) / 1e12, bound_us, us / bound_us,
        sample, static_cast<long long>(mismatches));
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}
