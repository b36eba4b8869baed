// The lightning indexer (spec §2.7: each CSA row's scores over its visible compressed entries,
// then the top 512) at V4-Flash dimensions (64 heads x 128, rate 4) with the FP8 cache's state:
// packed FP4 index keys, queries rounded by LaunchIndexQueryRound (Hadamard + FP4 blocks),
// per-block dots (fp4_blocks). One launch shape at a time, as the model launches it: decode rows
// (each its own sequence at position --context - 1) and a prefill of --prefill tokens of one
// sequence (rows at positions 0 .. n - 1; the scores in chunks of as many rows as 16M floats of
// scratch hold, as the model sizes them). Variants: tc (the scores on the tensor cores, the model's
// default from one row; from IndexerTopKParams::tc_runs_min_rows rows, 16 rows a block sharing
// their keys' decode), tc_rows (the tensor cores, one row a block at every size) and cuda (the
// CUDA cores); all give the same bits. Device time per launch: the median of 7 timed launches
// after 2 warm-ups.
//
// Bounds: flop_bound_us = the scores' useful FLOPs (2 * heads * head_dim per scored row and
// visible entry; a row with at most 512 visible entries takes them all, unscored) at 989 TFLOP/s
// (the bf16 tensor peak); mem_bound_us = the bytes that must move (the queries and head weights,
// each sequence's visible keys once, the scores written and read back once, the selection) at the
// measured copy bandwidth; ratio = us / the larger.
//   bench_indexer [--rows 1,32,128,256] [--context 4096] [--prefill 8192]
//                 [--variants tc,tc_rows,cuda]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "gpu_bench.h"

namespace gpu = dsinfer::backend::cuda;
namespace qc = dsinfer::backend::qc;

namespace {

using dsinfer::bench::RandomFloats;
using dsinfer::bench::Upload;

constexpr int kHeads = 64, kDim = 128, kRope = 64, kRate = 4, kTopk = 512;
constexpr int kRowsShift = 4;  // 16 entries a page
constexpr int64_t kScoreFloats = int64_t{16} << 20;
constexpr double kPeakFlops = 989e12;
// The FP8 cache's index key: 128 e2m1 codes and one power-of-two scale per 32 (IndexKeyFormat).
constexpr qc::PackedRow kKey{qc::Kind::kFp4Pow2, kDim, 32, 0};

// One launch shape: `n` query rows, either one sequence each at position context - 1 (decode) or
// one sequence at positions 0 .. n - 1 (prefill).
struct Setup {
  int64_t n = 0, key_bytes = 0, scored_entries = 0;  // keys read; sum of scored rows' entries
  std::vector<gpu::DeviceBuffer> bufs;
  gpu::IndexerTopKParams p;

  Setup(int64_t rows, bool prefill, int context, gpu::StreamHandle st) : n(rows) {
    const int64_t seqs = prefill ? 1 : n;
    const int last = prefill ? static_cast<int>(n) - 1 : context - 1;
    const dsinfer::bench::BenchRows rows_meta(n, prefill, last, &bufs);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t visible = (rows_meta.pos[i] + 1) / kRate;
      if (visible > kTopk) scored_entries += visible;
    }
    const int64_t entries = (last + 1) / kRate + 1;  // the list's capacity, as the model's
    const int64_t pages = (entries + (1 << kRowsShift) - 1) >> kRowsShift;
    key_bytes = seqs * ((last + 1) / kRate) * kKey.bytes();
    std::vector<int32_t> list_pages;
    for (int64_t s = 0; s < seqs; ++s)
      for (int64_t i = 0; i < pages; ++i) list_pages.push_back(static_cast<int32_t>(s * pages + i));
    auto keep = [&](gpu::DeviceBuffer b) {
      bufs.push_back(std::move(b));
      return bufs.back().get();
    };
    p.meta = rows_meta.meta;
    // The queries as the model's indexer takes them: RoPE, Hadamard and FP4 blocks applied once.
    float* q = static_cast<float*>(keep(RandomFloats(n * kHeads * kDim, 1, st)));
    gpu::IndexQueryRoundParams qr;
    qr.q = q;
    qr.n = n;
    qr.heads = kHeads;
    qr.head_dim = kDim;
    qr.rope_dim = kRope;
    qr.inv_freq = static_cast<const float*>(keep(Upload(dsinfer::bench::RopeInvFreq(kRope))));
    qr.pos = p.meta.pos;
    gpu::LaunchIndexQueryRound(qr, st);
    p.q = q;
    p.weights = static_cast<const float*>(keep(RandomFloats(n * kHeads, 2, st)));
    p.weight_scale = 1.0f / std::sqrt(static_cast<float>(kHeads));
    // The keys: valid packed rows, pages of 16 back to back.
    const int64_t key_rows = seqs * pages << kRowsShift;
    float* pool = static_cast<float*>(
        keep(gpu::DeviceBuffer(static_cast<size_t>(key_rows) * kKey.floats() * sizeof(float))));
    gpu::RandomPackedRowsParams kr;
    kr.data = pool;
    kr.rows = key_rows;
    kr.rows_per_page = key_rows;
    kr.row_floats = kKey.floats();
    kr.format = kKey;
    kr.seed = 3;
    gpu::LaunchRandomPackedRows(kr, st);
    p.keys.pool = pool;
    p.keys.width = kKey.floats();
    p.keys.page_floats = (int64_t{1} << kRowsShift) * kKey.floats();
    p.keys.rows_shift = kRowsShift;
    p.keys.pages = static_cast<const int32_t*>(keep(Upload(list_pages)));
    p.keys.pages_stride = pages;
    p.keys.capacity = pages << kRowsShift;
    p.key_format = kKey;
    p.heads = kHeads;
    p.head_dim = kDim;
    p.rate = kRate;
    p.topk = kTopk;
    p.max_entries = static_cast<int>(entries);
    p.sel = static_cast<int32_t*>(keep(gpu::DeviceBuffer(static_cast<size_t>(n) * kTopk * 4)));
    p.sel_count = static_cast<int32_t*>(keep(gpu::DeviceBuffer(static_cast<size_t>(n) * 4)));
    p.score_rows = std::max<int64_t>(1, std::min<int64_t>(n, kScoreFloats / entries));
    p.scores = static_cast<float*>(
        keep(gpu::DeviceBuffer(static_cast<size_t>(p.score_rows) * entries * sizeof(float))));
    p.fp4_blocks = true;
    gpu::PrepareIndexerTopK(kHeads, kDim, p.max_entries);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "bench_indexer: no CUDA device\n");
    return 1;
  }
  std::vector<int64_t> rows = {1, 32, 128, 256};
  int64_t prefill = 8192;
  int context = 4096;
  const std::vector<std::string> all = {"tc", "tc_rows", "cuda"};
  std::vector<std::string> variants = all;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--rows" && v) {
      rows = dsinfer::bench::ParseIntList(argv[++i]);
    } else if (a == "--prefill" && v) {
      prefill = std::atoll(argv[++i]);
    } else if (a == "--context" && v) {
      context = std::max(kRate, std::atoi(argv[++i]));
    } else if (a == "--variants" && v) {
      variants = dsinfer::bench::SplitList(argv[++i]);
      for (const std::string& x : variants) {
        if (std::find(all.begin(), all.end(), x) == all.end()) {
          std::fprintf(stderr, "bench_indexer: unknown variant %s (tc, tc_rows, cuda)\n",
                       x.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "bench_indexer: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  gpu::Stream stream;
  const gpu::StreamHandle st = stream.get();
  const double gbs = dsinfer::bench::PrintSetup(st);
  struct Case {
    int64_t n;
    bool prefill;
  };
  std::vector<Case> cases;
  for (int64_t r : rows) {
    if (r >= 1) cases.push_back({r, false});
  }
  if (prefill > 0) cases.push_back({prefill, true});
  for (const Case& c : cases) {
    Setup s(c.n, c.prefill, context, st);
    const double flops = 2.0 * kHeads * kDim * static_cast<double>(s.scored_entries);
    const double bytes =
        static_cast<double>(c.n) * kHeads * (kDim + 1) * 4 + static_cast<double>(s.key_bytes) +
        8.0 * static_cast<double>(s.scored_entries) + static_cast<double>(c.n) * (kTopk + 1) * 4;
    const double flop_us = flops / kPeakFlops * 1e6, mem_us = bytes / (gbs * 1e9) * 1e6;
    for (const std::string& v : variants) {
      gpu::IndexerTopKParams p = s.p;
      const bool on_tc = v != "cuda";
      p.tensor_core_min_rows = on_tc ? 1 : 0;
      if (v == "tc_rows") p.tc_runs_min_rows = 0;
      const bool tc = on_tc && gpu::IndexerTensorCoresFit(p);
      const double us = dsinfer::bench::MedianEventUs([&] { gpu::LaunchIndexerTopK(p, st); }, st);
      std::printf(
          "{\"bench\": \"indexer\", \"rows\": %lld, \"prefill\": %s, \"variant\": \"%s\", "
          "\"tensor_cores\": %s, \"score_rows\": %lld, \"us\": %.1f, \"tflops\": %.1f, "
          "\"GB\": %.4f, \"flop_bound_us\": %.2f, \"mem_bound_us\": %.2f, \"ratio_to_bound\": "
          "%.2f}\n",
          static_cast<long long>(c.n), c.prefill ? "true" : "false", v.c_str(),
          tc ? "true" : "false", static_cast<long long>(p.score_rows), us,
          flops / (us * 1e-6) / 1e12, bytes / 1e9, flop_us, mem_us,
          us / std::max(std::max(flop_us, mem_us), 1e-3));
      std::fflush(stdout);
    }
  }
  return 0;
}
