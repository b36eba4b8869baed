// The sparse attention at V4-Flash dimensions (64 heads x 512, rope 64, SWA 128) on the GPU, one
// launch shape at a time: the CUDA-core kernel and the tensor-core kernel (its chunks split over
// blocks where the launcher chooses, and never split), for the three layer kinds — SWA (window
// only), CSA (ratio 4, 512 selected entries) and HCA (ratio 128, every entry) — at decode rows
// (each its own sequence at context --context) and at a prefill of --prefill tokens of one
// sequence. Device time per launch: the median of 7 timed launches after 2 warm-ups.
//
// The packed variants read the same shapes from the FP8 cache's packed rows (fp8_ds_mla: 448 e4m3
// codes, 64 bf16 RoPE values, 7 scale bytes = 146 floats a key; SparseAttentionParams::kv_format),
// their mem_bound_us counting those bytes.
//
// Bounds: flop_bound_us = the useful FLOPs (4 * heads * dim per row and key) at 989 TFLOP/s (the
// H100/H200 dense bf16 peak); mem_bound_us = the bytes that must move (the query and output rows,
// each distinct key row once) at the measured device copy bandwidth; ratio = time / the larger.
// The tensor-core kernel issues six bf16 products per fp32 product (the exact three-part split),
// so its own compute floor is 6x flop_bound_us.
//   bench_attention [--rows 1,32,128] [--prefill 8192] [--context 4096] [--kinds swa,csa,hca]
//                   [--variants tc,tc_packed,...] (default: every variant) [--row-pv-sync]
//                   [--codes] [--row-prepass]
//   (--row-pv-sync: the row block's P V on mma.sync instead of warpgroup MMA, the same bits;
//   --codes: the output as the FP8-instruction mode's act_quant codes, out_c, instead of fp32
//   rows, as the mode's model runs it; its bytes counted as 1 a value plus the scales;
//   --row-prepass: where a prefill's launch takes the row block (its rows start at position 0),
//   the key pre-pass, LaunchRowKeysDecode, timed with it, the kernel's name suffixed "_prepass")
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "gpu_bench.h"

namespace gpu = dsinfer::backend::cuda;

namespace {

using dsinfer::bench::RandomFloats;
using dsinfer::bench::Upload;

constexpr int kHeads = 64, kDim = 512, kRope = 64, kWindow = 128, kTopk = 512;
constexpr int kRowsShift = 4;  // 16 compressed entries a page
constexpr double kPeakFlops = 989e12;

struct Kind {
  std::string name;
  int rate;     // 0: window only
  bool select;  // CSA: kTopk selected entries per row (fewer while fewer are visible)
};

// The FP8 cache's K=V row at these dimensions.
constexpr dsinfer::backend::qc::PackedRow kPackedKv{dsinfer::backend::qc::Kind::kFp8Pow2,
                                                    kDim - kRope, 64, kRope};

// `rows` valid packed rows of kPackedKv, back to back.
gpu::DeviceBuffer RandomPackedRows(int64_t rows, uint64_t seed, gpu::StreamHandle st) {
  const int64_t width = kPackedKv.floats();
  gpu::DeviceBuffer b(static_cast<size_t>(std::max<int64_t>(rows, 1) * width) * sizeof(float));
  gpu::RandomPackedRowsParams f;
  f.data = static_cast<float*>(b.get());
  f.rows = rows;
  f.rows_per_page = std::max<int64_t>(rows, 1);
  f.page_floats = 0;
  f.row_floats = width;
  f.format = kPackedKv;
  f.seed = seed;
  gpu::LaunchRandomPackedRows(f, st);
  return b;
}

// One launch shape: `rows` query rows, either one sequence each at position context - 1 (decode)
// or one sequence at positions 0 .. rows - 1 (prefill, its window rows inside the call).
struct Setup {
  int64_t rows = 0, key_rows = 0, flops_keys = 0;  // distinct key rows; sum of keys over rows
  std::vector<gpu::DeviceBuffer> bufs;
  gpu::SparseAttentionParams p;
  gpu::SparseAttentionParams packed;  // p over packed rows of the same shapes

  Setup(const Kind& k, int64_t n, bool prefill, int context, gpu::StreamHandle st) : rows(n) {
    const int64_t seqs = prefill ? 1 : n;
    const int last = prefill ? static_cast<int>(n) - 1 : context - 1;
    const dsinfer::bench::BenchRows rows_meta(n, prefill, last, &bufs);
    const std::vector<int32_t>& pos = rows_meta.pos;
    const int64_t entries = k.rate > 0 ? (last + 1) / k.rate + 1 : 1;
    const int64_t pages = (entries + (1 << kRowsShift) - 1) >> kRowsShift;
    std::vector<int32_t> list_pages, ring_pages, sel, sel_count(n, 0);
    for (int64_t s = 0; s < seqs; ++s) {
      ring_pages.push_back(static_cast<int32_t>(s));
      for (int64_t i = 0; i < pages; ++i) list_pages.push_back(static_cast<int32_t>(s * pages + i));
    }
    std::mt19937 rng(7);
    if (k.select) sel.assign(static_cast<size_t>(n) * kTopk, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int visible = k.rate > 0 ? (pos[i] + 1) / k.rate : 0;
      int comp = k.rate == 0 ? 0 : k.select ? std::min(visible, kTopk) : visible;
      if (k.select) {
        sel_count[i] = comp;
        for (int j = 0; j < comp; ++j) sel[i * kTopk + j] = static_cast<int32_t>(rng() % visible);
      }
      flops_keys += std::min(kWindow, pos[i] + 1) + comp;
    }
    // Distinct key rows: decode, each sequence's window and its visible entries (all of HCA's;
    // CSA's 512 of 1,024 are counted as read); prefill, the call's rows and the entries.
    key_rows = prefill ? n + (k.rate > 0 ? entries : 0)
                       : seqs * (kWindow + (k.rate == 0 ? 0
                                            : k.select  ? kTopk
                                                        : entries - 1));
    auto keep = [&](gpu::DeviceBuffer b) {
      bufs.push_back(std::move(b));
      return bufs.back().get();
    };
    p.meta = rows_meta.meta;
    p.q = static_cast<const float*>(keep(RandomFloats(n * kHeads * kDim, 1, st)));
    p.q_norm_eps = 1e-6f;
    p.kv = static_cast<const float*>(keep(RandomFloats(n * kDim, 2, st)));
    p.window.pool = static_cast<float*>(keep(RandomFloats(seqs * kWindow * kDim, 3, st)));
    p.window.cap = kWindow;
    p.window.width = kDim;
    p.window.page_floats = int64_t{kWindow} * kDim;
    p.window.pages = static_cast<const int32_t*>(keep(Upload(ring_pages)));
    p.window.pages_stride = 1;
    if (k.rate > 0) {
      p.comp.pool =
          static_cast<float*>(keep(RandomFloats(seqs * pages * (1 << kRowsShift) * kDim, 4, st)));
      p.comp.width = kDim;
      p.comp.page_floats = (int64_t{1} << kRowsShift) * kDim;
      p.comp.rows_shift = kRowsShift;
      p.comp.pages = static_cast<const int32_t*>(keep(Upload(list_pages)));
      p.comp.pages_stride = pages;
      p.comp.capacity = pages << kRowsShift;
      p.rate = k.rate;
      if (k.select) {
        p.sel = static_cast<const int32_t*>(keep(Upload(sel)));
        p.sel_count = static_cast<const int32_t*>(keep(Upload(sel_count)));
        p.sel_stride = kTopk;
      }
    }
    p.window_size = kWindow;
    p.heads = kHeads;
    p.dim = kDim;
    std::vector<float> sink(kHeads, 0.5f);
    p.sink = static_cast<const float*>(keep(Upload(sink)));
    p.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
    p.rope_dim = kRope;
    p.inv_freq = static_cast<const float*>(keep(Upload(dsinfer::bench::RopeInvFreq(kRope))));
    p.out =
        static_cast<float*>(keep(gpu::DeviceBuffer(static_cast<size_t>(n) * kHeads * kDim * 4)));
    const int64_t width = kPackedKv.floats();
    packed = p;
    packed.kv_format = kPackedKv;
    packed.kv_bf16 = true;
    packed.kv = static_cast<const float*>(keep(RandomPackedRows(n, 12, st)));
    packed.window.pool = static_cast<float*>(keep(RandomPackedRows(seqs * kWindow, 13, st)));
    packed.window.width = width;
    packed.window.page_floats = int64_t{kWindow} * width;
    if (k.rate > 0) {
      packed.comp.pool =
          static_cast<float*>(keep(RandomPackedRows(seqs * pages * (1 << kRowsShift), 14, st)));
      packed.comp.width = width;
      packed.comp.page_floats = (int64_t{1} << kRowsShift) * width;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "bench_attention: no CUDA device\n");
    return 1;
  }
  std::vector<int64_t> rows = {1, 32, 128};
  int64_t prefill = 8192;
  int context = 4096;
  std::string kinds = "swa,csa,hca";
  std::vector<std::string> variants;  // only those; empty: all
  bool codes = false, row_prepass = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--rows" && v) {
      rows = dsinfer::bench::ParseIntList(argv[++i]);
    } else if (a == "--prefill" && v) {
      prefill = std::atoll(argv[++i]);
    } else if (a == "--context" && v) {
      context = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--kinds" && v) {
      kinds = argv[++i];
    } else if (a == "--variants" && v) {
      variants = dsinfer::bench::SplitList(argv[++i]);
    } else if (a == "--codes") {
      codes = true;
    } else if (a == "--row-prepass") {
      row_prepass = true;
    } else if (a == "--row-pv-sync") {  // the row block's P V on mma.sync (the same bits)
      gpu::KernelOptions ko;            // the defaults (reading them first would freeze them)
      ko.attention_row_pv_wgmma = false;
      gpu::SetKernelOptions(ko);
    } else {
      std::fprintf(stderr, "bench_attention: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  gpu::Stream stream;
  const gpu::StreamHandle st = stream.get();
  const double gbs = dsinfer::bench::PrintSetup(st);
  const int64_t width = int64_t{kHeads} * kDim;  // (--codes: the codes' row)
  std::vector<Kind> ks;
  for (const Kind& k : {Kind{"swa", 0, false}, Kind{"csa", 4, true}, Kind{"hca", 128, false}})
    if (kinds.find(k.name) != std::string::npos) ks.push_back(k);
  // The model's split workspace (CudaModel::Impl::kAttnSplitFloats).
  gpu::DeviceBuffer ws(size_t{64} << 20);
  struct Case {
    int64_t n;
    bool prefill;
  };
  std::vector<Case> cases;
  for (int64_t r : rows) cases.push_back({r, false});
  if (prefill > 0) cases.push_back({prefill, true});
  for (const Kind& k : ks) {
    for (const Case& c : cases) {
      Setup s(k, c.n, c.prefill, context, st);
      const double flops = 4.0 * kHeads * kDim * static_cast<double>(s.flops_keys);
      // The query rows in, the output out: fp32 rows, or (--codes) a byte a value and a scale a
      // 128-value block.
      const double io_bytes = c.n * kHeads * kDim * (codes ? 4.0 + 1.0 + 4.0 / 128 : 8.0);
      gpu::DeviceBuffer out_c(codes ? static_cast<size_t>(gpu::MmaQuantBytes(c.n, width)) : 0),
          out_cs(codes ? static_cast<size_t>(gpu::MmaScaleCount(c.n, width) * 4) : 0);
      // --row-prepass: the pre-decoded keys of a prefill (its one sequence starts at position 0:
      // SparseAttentionParams::keys16's contract), 2 n dim bf16.
      gpu::DeviceBuffer keys16(row_prepass && c.prefill ? static_cast<size_t>(2 * c.n * kDim * 2)
                                                        : 0);
      // tc_bf16kv: the FP8 cache's bf16-exact K=V (SparseAttentionParams::kv_bf16; 3 part
      // products instead of 6; timing only: these random values are not bf16 values).
      // *_packed: the packed rows (the FP8 cache's state); *_qp: with the FP8 cache's bf16
      // queries and weights (qp_bf16, what the model runs with the FP8 cache).
      struct Variant {
        const char* name;
        int tc, split;
        bool kv_bf16, packed, qp = false;
        int row = 0;  // tc_row: the row block (1 always, -1 never, 0 by rows)
      };
      for (const Variant& v :
           {Variant{"cuda_cores", -1, 0, false, false}, Variant{"tc", 1, 0, false, false},
            Variant{"tc_split", 1, 1, false, false}, Variant{"tc_unsplit", 1, -1, false, false},
            Variant{"tc_bf16kv", 1, 0, true, false},
            Variant{"cuda_cores_packed", -1, 0, true, true}, Variant{"tc_packed", 1, 0, true, true},
            Variant{"tc_split_packed", 1, 1, true, true},
            Variant{"tc_unsplit_packed", 1, -1, true, true},
            Variant{"tc_packed_qp", 1, 0, true, true, true},
            Variant{"tc_split_packed_qp", 1, 1, true, true, true},
            Variant{"tc_unsplit_packed_qp", 1, -1, true, true, true},
            Variant{"tc_row_packed_qp", 1, -1, true, true, true, 1},
            Variant{"tc_norow_packed_qp", 1, -1, true, true, true, -1}}) {
        if (!variants.empty() &&
            std::find(variants.begin(), variants.end(), std::string(v.name)) == variants.end())
          continue;
        gpu::SparseAttentionParams p = v.packed ? s.packed : s.p;
        p.tensor_cores = v.tc;
        p.tc_split = v.split;
        p.tc_row = v.row;
        p.kv_bf16 = v.kv_bf16;
        p.qp_bf16 = v.qp;
        if (codes) {  // (the pitches of MmaCodes, as the model's attention takes them)
          const gpu::QuantizedRows view = gpu::MmaCodes(nullptr, nullptr, c.n, width);
          p.out_c = static_cast<uint8_t*>(out_c.get());
          p.out_ldc = view.ldc;
          p.out_cs = static_cast<float*>(out_cs.get());
          p.out_ldcs = view.ldcs;
        }
        const double bytes =
            io_bytes + static_cast<double>(s.key_rows) * (v.packed ? kPackedKv.bytes() : kDim * 4);
        const double flop_us = flops / kPeakFlops * 1e6, mem_us = bytes / (gbs * 1e9) * 1e6;
        p.tc_workspace = static_cast<float*>(ws.get());
        p.tc_workspace_floats = static_cast<int64_t>(ws.bytes() / 4);
        const bool prepass =
            row_prepass && c.prefill && v.packed && v.qp && gpu::SparseAttentionTakesRowBlock(p);
        const std::string name = std::string(v.name) + (prepass ? "_prepass" : "");
        const double us = dsinfer::bench::MedianEventUs(
            [&] {
              if (prepass) {
                gpu::SparseAttentionParams pre = p;
                gpu::LaunchRowKeysDecode(pre, keys16.as<uint16_t>(), st);
                pre.keys16 = keys16.as<uint16_t>();
                gpu::LaunchSparseAttention(pre, st);
              } else {
                gpu::LaunchSparseAttention(p, st);
              }
            },
            st);
        const bool split = v.tc > 0 && gpu::SparseAttentionTcWillSplit(p);
        std::printf(
            "{\"bench\": \"attention\", \"kind\": \"%s\", \"rows\": %lld, \"prefill\": %s, "
            "\"kernel\": \"%s\", \"codes\": %s, \"split\": %s, \"us\": %.1f, \"tflops\": %.1f, "
            "\"GB\": %.3f, "
            "\"flop_bound_us\": %.1f, \"mem_bound_us\": %.1f, \"ratio_to_bound\": %.2f}\n",
            k.name.c_str(), static_cast<long long>(c.n), c.prefill ? "true" : "false", name.c_str(),
            codes ? "true" : "false", split ? "true" : "false", us, flops / (us * 1e-6) / 1e12,
            bytes / 1e9, flop_us, mem_us, us / std::max(flop_us, mem_us));
      }
    }
  }
  return 0;
}
