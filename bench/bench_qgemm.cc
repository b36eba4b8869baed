// The FP8 / FP4 / bf16 linears of flash-l8 (V4-Flash dimensions) at prefill sizes on the GPU
// (issue 27): the dense FP8 projections over M tokens, the routed experts' FP4 w1/w3 pair and w2
// over M x 6 pairs routed evenly over 256 experts (192 rows each at M = 8,192), each launched as
// the model launches it (LaunchLinear / LaunchExpertLinear with the act_quant scratch: the
// pre-pass, then the tiled GEMM), and the bf16 projections (the compressors' CSA, HCA, indexer;
// the head, 129,280 x 4,096, which decode batches run at M tokens too) on the tensor cores
// (LaunchBf16TcLinear, its split pre-pass included) or, `--bf16 cuda`, on the CUDA cores
// (LaunchLinear). Device time per launch by CUDA-graph replay; TFLOP/s and the ratio to the dense
// f16 / bf16 tensor-core peak (989 TFLOP/s, H100/H200 SXM: the GEMM runs f16 wgmma / mma.sync on
// exact e4m3 / e2m1 values; the bf16 linear issues three mma per product, so its ratio is to a
// third of it), and which kernel ran (the launch counters).
// `--prequant` hands the FP8 / FP4 linears their rows quantized beforehand (as the model does at
// decode sizes: the act_quant pass then runs outside the timed launch), and every line reports
// the weight bytes a launch reads (routed experts: the experts with a row) as GB/s, the figure
// that bounds decode sizes.
//   bench_qgemm [--tokens M] [--qgemm-mma wgmma|sync] [--bf16 tc|cuda]
//               [--bf16-tile auto|few|many|wg] [--only NAME] [--prequant] [--ws-scales-t 0|1]
//               [--qexpert-rows-min-slots N]
//   ->  one JSON line per shape
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/runtime.h"
#include "gpu_bench.h"

namespace gpu = dsinfer::backend::cuda;
using dsinfer::bench::MedianGraphUs;
using gpu::WeightFormat;

namespace {

constexpr double kTensorPeakTflops = 989.0;
constexpr int kExperts = 256, kTopK = 6;

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t n, k;
  int64_t groups = 0;  // wo_a: 8 groups, each reading its own k columns of x
  bool swiglu = false;
  bool experts = false;
};

struct Matrix {
  gpu::DeviceBuffer data, scale;
};

Matrix RandomMatrix(WeightFormat f, int64_t n, int64_t k, uint32_t seed, gpu::StreamHandle st) {
  const dsinfer::bench::WeightBytes b = dsinfer::bench::GpuWeightBytes(f, n, k);
  Matrix m{gpu::DeviceBuffer(static_cast<size_t>(b.data)),
           gpu::DeviceBuffer(static_cast<size_t>(b.scale))};
  dsinfer::bench::FillRandomWeight(f, n, k, seed, m.data.get(), m.scale.get(), st);
  return m;
}

gpu::DeviceBuffer Upload(const void* p, size_t bytes) {
  gpu::DeviceBuffer b(bytes);
  gpu::CopyToDeviceSync(b.get(), p, bytes);
  return b;
}

// A flag of two values: *out = (v == on); false (with a message) for any other value.
bool TwoWay(const std::string& flag, const std::string& v, const char* on, const char* off,
            bool* out) {
  if (v != on && v != off) {
    std::fprintf(stderr, "bench_qgemm: %s takes %s or %s\n", flag.c_str(), on, off);
    return false;
  }
  *out = v == on;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "bench_qgemm: no CUDA device\n");
    return 1;
  }
  int64_t m = 8192;
  std::string only;
  bool bf16_tc = true, prequant = false;
  gpu::Bf16TcTile tile = gpu::Bf16TcTile::kAuto;
  gpu::KernelOptions ko;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--tokens" && has_value) {
      m = std::atoll(argv[++i]);
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--prequant") {
      prequant = true;
    } else if (a == "--qexpert-rows-min-slots" && has_value) {
      ko.qexpert_rows_min_slots = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--ws-scales-t" && has_value) {
      if (!TwoWay(a, argv[++i], "1", "0", &ko.qgemm_ws_scales_t)) return 2;
    } else if (a == "--qgemm-mma" && has_value) {
      if (!TwoWay(a, argv[++i], "wgmma", "sync", &ko.qgemm_wgmma)) return 2;
    } else if (a == "--bf16" && has_value) {
      if (!TwoWay(a, argv[++i], "tc", "cuda", &bf16_tc)) return 2;
    } else if (a == "--bf16-tile" && has_value) {
      const std::string v = argv[++i];
      if (v != "auto" && v != "few" && v != "many" && v != "wg") {
        std::fprintf(stderr, "bench_qgemm: --bf16-tile takes auto, few, many or wg\n");
        return 2;
      }
      tile = v == "few"    ? gpu::Bf16TcTile::kFew
             : v == "many" ? gpu::Bf16TcTile::kMany
             : v == "wg"   ? gpu::Bf16TcTile::kWg
                           : gpu::Bf16TcTile::kAuto;
    } else {
      std::fprintf(stderr, "bench_qgemm: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (m < 1 || m > (int64_t{1} << 20)) {
    std::fprintf(stderr, "bench_qgemm: --tokens must be in [1, 2^20]\n");
    return 2;
  }
  gpu::SetKernelOptions(ko);
  const std::vector<Shape> shapes = {
      {"wq_a", WeightFormat::kFp8, 1024, 4096},
      {"wq_b", WeightFormat::kFp8, 32768, 1024},
      {"wkv", WeightFormat::kFp8, 512, 4096},
      {"idx_wq_b", WeightFormat::kFp8, 8192, 1024},
      {"wo_a", WeightFormat::kFp8, 8192, 4096, 8},
      {"wo_b", WeightFormat::kFp8, 4096, 8192},
      {"shared_w13", WeightFormat::kFp8, 2048, 4096, 0, true},
      {"shared_w2", WeightFormat::kFp8, 4096, 2048},
      {"experts_w13", WeightFormat::kFp4, 2048, 4096, 0, true, true},
      {"experts_w2", WeightFormat::kFp4, 4096, 2048, 0, false, true},
      {"csa_compressor", WeightFormat::kBf16, 2048, 4096},  // wkv + wgate, overlapping windows
      {"hca_compressor", WeightFormat::kBf16, 1024, 4096},
      {"index_compressor", WeightFormat::kBf16, 512, 4096},
      {"router_gate", WeightFormat::kBf16, 256, 4096},  // the MoE router's logits (tc_gate)
      {"head", WeightFormat::kBf16, 129280, 4096},      // the vocabulary's logits (decode batches)
  };
  gpu::Stream st;
  std::printf(
      "{\"bench\": \"qgemm_setup\", \"device\": \"%s\", \"tokens\": %lld, \"mma\": \"%s\", "
      "\"tensor_peak_tflops\": %.0f}\n",
      gpu::DeviceDescription().c_str(), static_cast<long long>(m),
      ko.qgemm_wgmma ? "wgmma" : "sync", kTensorPeakTflops);

  // The routing: token i's j-th pair (i * 6 + j) goes to expert (i + 43 j) % 256 (six distinct
  // experts per token, every expert the same count); the pair list grouped by expert.
  const int64_t P = m * kTopK;
  std::vector<std::vector<int32_t>> by_expert(kExperts);
  for (int64_t i = 0; i < m; ++i)
    for (int j = 0; j < kTopK; ++j)
      by_expert[(i + 43 * j) % kExperts].push_back(static_cast<int32_t>(i * kTopK + j));
  // Slots list the experts with rows, as the router's grouping does (an empty expert's weights
  // are not read).
  std::vector<int32_t> act, off, pairs;
  for (int e = 0; e < kExperts; ++e) {
    if (by_expert[e].empty()) continue;
    act.push_back(e);
    off.push_back(static_cast<int32_t>(pairs.size()));
    pairs.insert(pairs.end(), by_expert[e].begin(), by_expert[e].end());
  }
  off.push_back(static_cast<int32_t>(pairs.size()));
  act.resize(kExperts, 0);
  off.resize(kExperts + 1, off.back());
  const int32_t nact = static_cast<int32_t>(
      std::count_if(by_expert.begin(), by_expert.end(), [](const auto& v) { return !v.empty(); }));
  const int64_t active_experts = nact;
  gpu::DeviceBuffer d_act = Upload(act.data(), act.size() * 4),
                    d_off = Upload(off.data(), off.size() * 4),
                    d_pairs = Upload(pairs.data(), pairs.size() * 4), d_nact = Upload(&nact, 4);

  for (const Shape& s : shapes) {
    if (!only.empty() && only != s.name) continue;
    const int mats = (s.swiglu ? 2 : 1) * (s.experts ? kExperts : 1);
    std::vector<Matrix> w;
    for (int i = 0; i < mats; ++i) w.push_back(RandomMatrix(s.format, s.n, s.k, 100 + i, st.get()));
    // Input rows: dense, m tokens (wo_a: 8 groups of k columns); experts, w13 reads a token's
    // row for each of its pairs (x_row_div 6), w2 a row per pair.
    const int64_t xk = s.groups > 0 ? s.groups * s.k : s.k;
    const int64_t x_rows = s.experts && !s.swiglu ? P : m;
    const int64_t y_rows = s.experts ? P : m;
    gpu::DeviceBuffer x(static_cast<size_t>(x_rows * xk * 4)),
        y(static_cast<size_t>(y_rows * s.n * 4)), u(static_cast<size_t>(y_rows * s.n * 4)),
        aq(static_cast<size_t>(x_rows * gpu::QuantizedLd(xk) * 2)),
        // (rows rounded up to 128-token tiles, as the model's: the transposed scales.)
        as(static_cast<size_t>((x_rows + 127) / 128 * 128 * gpu::QuantizedScales(xk) * 4)),
        split(static_cast<size_t>(gpu::Bf16SplitElements(x_rows, xk) * 2));
    const bool tc = s.format == WeightFormat::kBf16 && bf16_tc;
    {
      gpu::RandomFillParams f;
      f.data = x.get();
      f.count = x_rows * xk;
      f.seed = 7;
      gpu::LaunchRandomFill(f, st.get());
    }
    // --prequant: the rows quantized once, outside the timed launch (xq: natural order, as the
    // model's decode-size pre-pass; the tiled GEMM restages them itself).
    gpu::QuantizedRows xq;
    gpu::DeviceBuffer pq, ps;
    if (prequant && s.format != WeightFormat::kBf16) {
      pq = gpu::DeviceBuffer(static_cast<size_t>(x_rows * gpu::QuantizedLd(xk) * 2));
      ps = gpu::DeviceBuffer(static_cast<size_t>(x_rows * gpu::QuantizedScales(xk) * 4));
      xq = gpu::LaunchActQuantRows(x.as<float>(), xk, x_rows, xk, pq.as<uint16_t>(), ps.as<float>(),
                                   st.get());
    }
    gpu::ActQuantScratch scratch;
    scratch.q = aq.as<uint8_t>();
    scratch.q_bytes = static_cast<int64_t>(aq.bytes());
    scratch.s = as.as<float>();
    scratch.s_count = static_cast<int64_t>(as.bytes() / 4);
    gpu::WeightRef ref;
    ref.format = s.format;
    ref.n = s.n;
    ref.k = s.k;
    ref.scale_format =
        s.format == WeightFormat::kBf16 ? gpu::ScaleFormat::kNone : gpu::ScaleFormat::kUe8m0;
    // Expert tables: w1 (or w2) data / scale, w3 data / scale.
    std::vector<gpu::DeviceBuffer> tables;
    if (s.experts) {
      for (int t = 0; t < 4; ++t) {
        std::vector<const void*> v(kExperts);
        for (int e = 0; e < kExperts; ++e) {
          const Matrix& mx = w[static_cast<size_t>(s.swiglu ? 2 * e + t / 2 : e)];
          v[e] = t % 2 == 0 ? mx.data.get() : mx.scale.get();
        }
        tables.push_back(Upload(v.data(), v.size() * sizeof(void*)));
      }
    }
    auto launch = [&](int) {
      if (tc) {
        gpu::Bf16TcLinearParams p;
        p.w = w[0].data.as<uint16_t>();
        p.n = s.n;
        p.k = s.k;
        p.x = x.as<float>();
        p.ldx = xk;
        p.m = m;
        p.split = split.as<uint16_t>();
        p.y = y.as<float>();
        p.ldy = s.n;
        p.tile = tile;
        gpu::LaunchBf16TcLinear(p, st.get());
        return;
      }
      if (s.experts) {
        gpu::ExpertLinearParams p;
        p.shape = ref;
        p.aq = scratch;
        p.data = tables[0].as<const void*>();
        p.scale = tables[1].as<const void*>();
        p.x = x.as<float>();
        p.ldx = xk;
        p.x_row_div = s.swiglu ? kTopK : 1;
        p.y = y.as<float>();
        p.ldy = s.n;
        p.active = d_act.as<int32_t>();
        p.num_active = d_nact.as<int32_t>();
        p.offsets = d_off.as<int32_t>();
        p.pairs = d_pairs.as<int32_t>();
        p.max_slots = static_cast<int>(std::min<int64_t>(kExperts, P));
        p.total_pairs = P;
        p.xq = xq;
        if (s.swiglu) {
          gpu::LaunchExpertLinearSwiglu(p, tables[2].as<const void*>(), tables[3].as<const void*>(),
                                        u.as<float>(), 7.0f, st.get());
        } else {
          gpu::LaunchExpertLinear(p, st.get());
        }
        return;
      }
      gpu::LinearParams p;
      p.w = ref;
      p.w.data = w[0].data.get();
      p.w.scale = w[0].scale.get();
      p.aq = scratch;
      p.x = x.as<float>();
      p.ldx = xk;
      p.m = m;
      p.y = y.as<float>();
      p.ldy = s.n;
      p.xq = xq;
      if (s.groups > 0) {
        p.x_group_rows = s.n / s.groups;
        p.x_group_stride = s.k;
      }
      if (s.swiglu) {
        gpu::WeightRef w3 = p.w;
        w3.data = w[1].data.get();
        w3.scale = w[1].scale.get();
        gpu::LaunchLinearSwiglu(p, w3, u.as<float>(), 7.0f, st.get());
      } else {
        gpu::LaunchLinear(p, st.get());
      }
    };
    const int64_t sync_before = gpu::QGemmLaunches(), wg_before = gpu::QGemmWgLaunches(),
                  rows_before = gpu::QExpertRowsLaunches(), ws_before = gpu::QGemmWsLaunches(),
                  bf16_wg_before = gpu::Bf16TcWgLaunches();
    launch(0);
    st.Synchronize();
    const bool many = gpu::Bf16TcManyTileFor(tile, s.n, m);
    const char* dense = gpu::QGemmWsLaunches() > ws_before         ? "wgmma_ws"
                        : gpu::QGemmWgLaunches() > wg_before       ? "wgmma"
                        : gpu::QGemmLaunches() > sync_before       ? "sync"
                        : gpu::QExpertRowsLaunches() > rows_before ? "expert_rows"
                        : s.format == WeightFormat::kBf16          ? "cuda_cores"
                                                                   : "decode";
    const char* kernel = !tc                                        ? dense
                         : gpu::Bf16TcWgLaunches() > bf16_wg_before ? "bf16_tc_wg"
                         : many                                     ? "bf16_tc_many"
                                                                    : "bf16_tc_few";
    const double us = MedianGraphUs(launch, 5, st.get());
    // FLOPs: 2 per multiply-add; each output row of a grouped input reads k columns.
    const double flop = 2.0 * static_cast<double>(y_rows) * s.n * s.k * (s.swiglu ? 2 : 1);
    const double tflops = flop / (us * 1e-6) / 1e12;
    const double peak = kTensorPeakTflops / (tc ? 3.0 : 1.0);
    // Weight bytes read: each matrix once (routed experts: those with a row).
    const dsinfer::bench::WeightBytes wb = dsinfer::bench::GpuWeightBytes(s.format, s.n, s.k);
    const double wbytes = static_cast<double>(wb.data + wb.scale) * (s.swiglu ? 2 : 1) *
                          static_cast<double>(s.experts ? active_experts : 1);
    std::printf(
        "{\"bench\": \"qgemm\", \"shape\": \"%s\", \"rows\": %lld, \"n\": %lld, \"k\": "
        "%lld, \"kernel\": \"%s\", \"us\": %.1f, \"tflop\": %.3f, \"tflops\": %.1f, "
        "\"ratio_to_peak\": %.2f, \"k_slices\": %d, \"weight_gb\": %.3f, \"weight_gbps\": %.0f, "
        "\"prequant\": %s}\n",
        s.name, static_cast<long long>(y_rows), static_cast<long long>(s.n),
        static_cast<long long>(s.k), kernel, us, flop / 1e12, tflops, peak / tflops,
        tc ? gpu::Bf16TcSlices(s.n, s.k) : 0, wbytes / 1e9, wbytes / (us * 1e-6) / 1e9,
        xq.q != nullptr ? "true" : "false");
    gpu::CheckLastError("bench_qgemm");
  }
  return 0;
}
