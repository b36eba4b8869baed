// The tensor-core sparse attention (LaunchSparseAttentionTc, issue 27) against the CUDA-core
// kernel and a double-precision host reference over flash and tiny shapes (window only, window +
// compressed entries with and without a selection list, the query's RMSNorm + RoPE or RoPE alone
// applied in the kernel, a partial head tile, rows whose window reaches into the ring), and its
// batch invariance: every row of a 300-row launch has the bits of that row launched alone; the
// FP8 cache's bf16 queries and weights (qp_bf16) against the CPU's AttendHeadBf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "model/quant_sim.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

struct Shape {
  std::string name;
  int heads, dim, rope;
  int window;   // W (the ring holds W rows)
  int rate;     // 0: window only
  bool select;  // CSA: a selection list of up to max_sel entries per row; else HCA (all)
  int max_sel;
  float q_norm_eps;  // >= 0: RMSNorm + RoPE in the kernel
  bool q_rope;       // RoPE alone in the kernel
  bool quant;        // act_quant'ed output too
  int first_pos;     // the rows' positions: first_pos .. first_pos + n - 1 (earlier: the ring)
  float sink_scale;
};

// One sequence (slot 0) of n rows at positions first_pos .. : its kv rows, a ring of the W earlier
// positions, compressed entries for every position, per-row selections; host copies for the
// reference and device copies for the kernels.
struct Case {
  Shape s;
  int n = 0;
  int64_t entries = 0, ldq = 0, lds = 0;
  static constexpr int kRowsShift = 4;  // 16 entries a page
  std::vector<int32_t> ids, pos, slot, begin, start, count, sel, sel_count, list_pages;
  int slots = 1;               // the sequences' slots (SplitIntoSequences)
  int64_t pages_per_slot = 0;  // the compressed entries' pages of each slot
  std::vector<float> q, kv, ring, comp, sink, inv;
  DeviceBuffer di, dp, ds, db, dst, dc, dsel, dselc, dlp, dq, dkv, dring, dcomp, dsink, dinv, page0;

  // upload false: the host copies alone (no device needed). bf16_kv: every K=V value rounded to
  // bf16 (as DeepSeek-V4's FP8 cache leaves them).
  Case(const Shape& shape, int rows, uint32_t seed, bool upload = true, bool bf16_kv = false)
      : s(shape), n(rows) {
    const int d = s.dim;
    std::mt19937 rng(seed);
    for (int i = 0; i < n; ++i) {
      ids.push_back(5 + i);
      pos.push_back(s.first_pos + i);
      slot.push_back(0);
      begin.push_back(0);
      start.push_back(s.first_pos);
      count.push_back(n);
    }
    q = testing::RandomVector(static_cast<size_t>(n) * s.heads * d, seed + 1);
    kv = testing::RandomVector(static_cast<size_t>(n) * d, seed + 2);
    ring = testing::RandomVector(static_cast<size_t>(s.window) * d, seed + 3);
    sink = testing::RandomVector(s.heads, seed + 4, s.sink_scale);
    inv.resize(s.rope / 2);
    for (int j = 0; j < s.rope / 2; ++j) inv[j] = std::pow(10000.0f, -2.0f * j / s.rope);
    const int last = s.first_pos + n - 1;
    entries = s.rate > 0 ? (last + 1) / s.rate + 1 : 1;
    const int64_t pages = (entries + (1 << kRowsShift) - 1) >> kRowsShift;
    entries = pages << kRowsShift;
    comp = testing::RandomVector(static_cast<size_t>(entries) * d, seed + 5);
    for (int64_t i = 0; i < pages; ++i) list_pages.push_back(static_cast<int32_t>(i));
    pages_per_slot = pages;
    if (bf16_kv) {
      for (std::vector<float>* v : {&kv, &ring, &comp}) {
        for (float& x : *v) x = RoundToBf16(x);
      }
    }
    sel_count.assign(n, 0);
    if (s.rate > 0 && s.select) {
      sel.assign(static_cast<size_t>(n) * s.max_sel, -1);
      for (int i = 0; i < n; ++i) {
        const int visible = (pos[i] + 1) / s.rate;
        // Some rows select nothing, most a random count up to max_sel, the first the maximum.
        int c = std::min(visible, s.max_sel);
        if (i > 0) c = static_cast<int>(rng() % (c + 1));
        sel_count[i] = c;
        for (int k = 0; k < c; ++k) sel[static_cast<size_t>(i) * s.max_sel + k] = rng() % visible;
      }
    }
    ldq = QuantizedLd(static_cast<int64_t>(s.heads) * d);
    lds = QuantizedScales(static_cast<int64_t>(s.heads) * d);
    if (upload) UploadAll();
  }

  void UploadAll() {
    di = Upload(ids), dp = Upload(pos), ds = Upload(slot), db = Upload(begin), dst = Upload(start),
    dc = Upload(count), dsel = Upload(sel), dselc = Upload(sel_count), dlp = Upload(list_pages),
    dq = Upload(q), dkv = Upload(kv), dring = Upload(ring), dcomp = Upload(comp),
    dsink = Upload(sink), dinv = Upload(inv),
    page0 = Upload(std::vector<int32_t>(static_cast<size_t>(slots), 0));
  }

  // The n rows as several sequences instead (lens, summing to n), each from position 0 in a slot
  // of its own (slot k), whose compressed entries are the case's pages rotated by k (so that each
  // sequence reads other entries); selections drawn again for the new positions. Before
  // UploadAll; the host copies' reference (Reference, Keys) no longer applies.
  void SplitIntoSequences(const std::vector<int>& lens, uint32_t seed) {
    std::mt19937 rng(seed);
    slots = static_cast<int>(lens.size());
    int r = 0;
    for (int k = 0; k < slots; ++k) {
      for (int i = 0; i < lens[k]; ++i, ++r) {
        pos[r] = i;
        slot[r] = k;
        begin[r] = r - i;
        start[r] = 0;
        count[r] = lens[k];
      }
    }
    EXPECT_EQ(r, n);
    const int64_t pages = pages_per_slot;
    list_pages.assign(static_cast<size_t>(slots * pages), 0);
    for (int k = 0; k < slots; ++k)
      for (int64_t i = 0; i < pages; ++i)
        list_pages[static_cast<size_t>(k * pages + i)] = static_cast<int32_t>((i + k) % pages);
    if (s.rate > 0 && s.select) {
      std::fill(sel.begin(), sel.end(), -1);
      for (int i = 0; i < n; ++i) {
        const int visible = (pos[i] + 1) / s.rate;
        const int c =
            visible == 0 ? 0 : static_cast<int>(rng() % (std::min(visible, s.max_sel) + 1));
        sel_count[i] = c;
        for (int k = 0; k < c; ++k) sel[static_cast<size_t>(i) * s.max_sel + k] = rng() % visible;
      }
    }
  }

  // The params of rows [r0, r0 + rows) (a launch of those rows alone: the same keys).
  SparseAttentionParams Params(int r0, int rows) const {
    SparseAttentionParams p;
    p.meta.ids = di.as<int32_t>() + r0;
    p.meta.pos = dp.as<int32_t>() + r0;
    p.meta.slot = ds.as<int32_t>() + r0;
    p.meta.seg_begin = db.as<int32_t>() + r0;
    p.meta.seg_start = dst.as<int32_t>() + r0;
    p.meta.seg_count = dc.as<int32_t>() + r0;
    p.meta.n = rows;
    p.q = dq.as<float>() + static_cast<int64_t>(r0) * s.heads * s.dim;
    p.q_norm_eps = s.q_norm_eps;
    p.q_rope = s.q_rope;
    p.kv = dkv.as<float>();
    p.window.pool = dring.as<float>();
    p.window.cap = s.window;
    p.window.width = s.dim;
    p.window.page_floats = static_cast<int64_t>(s.window) * s.dim;
    p.window.pages = page0.as<int32_t>();
    p.window.pages_stride = 1;
    if (s.rate > 0) {
      p.comp.pool = dcomp.as<float>();
      p.comp.width = s.dim;
      p.comp.page_floats = (int64_t{1} << kRowsShift) * s.dim;
      p.comp.rows_shift = kRowsShift;
      p.comp.pages = dlp.as<int32_t>();
      p.comp.pages_stride = pages_per_slot;
      p.comp.capacity = entries;
      p.rate = s.rate;
      if (s.select) {
        p.sel = dsel.as<int32_t>() + static_cast<int64_t>(r0) * s.max_sel;
        p.sel_count = dselc.as<int32_t>() + r0;
        p.sel_stride = s.max_sel;
      }
    }
    p.window_size = s.window;
    p.heads = s.heads;
    p.dim = s.dim;
    p.sink = dsink.as<float>();
    p.scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
    p.rope_dim = s.rope;
    p.inv_freq = dinv.as<float>();
    return p;
  }

  // Row t's key rows (host copies) in the kernels' order: its window, then its entries.
  std::vector<const float*> Keys(int t) const {
    const int d = s.dim, p = pos[t];
    std::vector<const float*> keys;
    const int n_win = std::min(s.window, p + 1);
    for (int j = 0; j < n_win; ++j) {
      const int sp = p - n_win + 1 + j;
      keys.push_back(sp >= start[t] ? kv.data() + static_cast<size_t>(begin[t] + sp - start[t]) * d
                                    : ring.data() + static_cast<size_t>(sp % s.window) * d);
    }
    if (s.rate > 0) {
      const int n_comp = s.select ? sel_count[t] : (p + 1) / s.rate;
      for (int k = 0; k < n_comp; ++k) {
        const int e = s.select ? sel[static_cast<size_t>(t) * s.max_sel + k] : k;
        keys.push_back(comp.data() + static_cast<size_t>(e) * d);
      }
    }
    return keys;
  }

  // The double-precision reference of every row: [n, heads, dim].
  std::vector<float> Reference() const {
    const int d = s.dim, roff = d - s.rope;
    std::vector<float> out(static_cast<size_t>(n) * s.heads * d);
    for (int t = 0; t < n; ++t) {
      const int p = pos[t];
      const std::vector<const float*> keys = Keys(t);
      for (int h = 0; h < s.heads; ++h) {
        std::vector<double> qv(d);
        const float* qr = q.data() + (static_cast<size_t>(t) * s.heads + h) * d;
        for (int c = 0; c < d; ++c) qv[c] = qr[c];
        if (s.q_norm_eps >= 0.0f) {
          double ss = 0;
          for (double v : qv) ss += v * v;
          const double sc = 1.0 / std::sqrt(ss / d + s.q_norm_eps);
          for (double& v : qv) v *= sc;
        }
        auto rotate = [&](std::vector<double>& x, bool inverse) {
          for (int j = 0; j < s.rope / 2; ++j) {
            const double a = static_cast<double>(static_cast<float>(p) * inv[j]);
            const double c = std::cos(a), sn = inverse ? -std::sin(a) : std::sin(a);
            const double x0 = x[roff + 2 * j], x1 = x[roff + 2 * j + 1];
            x[roff + 2 * j] = x0 * c - x1 * sn;
            x[roff + 2 * j + 1] = x0 * sn + x1 * c;
          }
        };
        if (s.q_norm_eps >= 0.0f || s.q_rope) rotate(qv, false);
        std::vector<double> z(keys.size());
        double m = sink[h];
        for (size_t j = 0; j < keys.size(); ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += qv[c] * keys[j][c];
          z[j] = dot / std::sqrt(static_cast<double>(d));
          m = std::max(m, z[j]);
        }
        double den = std::exp(sink[h] - m);
        std::vector<double> o(d, 0.0);
        for (size_t j = 0; j < keys.size(); ++j) {
          const double e = std::exp(z[j] - m);
          den += e;
          for (int c = 0; c < d; ++c) o[c] += e * keys[j][c];
        }
        for (double& v : o) v /= den;
        rotate(o, true);
        float* orow = out.data() + (static_cast<size_t>(t) * s.heads + h) * d;
        for (int c = 0; c < d; ++c) orow[c] = static_cast<float>(o[c]);
      }
    }
    return out;
  }
};

// The FP8 cache's packed K=V rows of a case (kv, ring, entries), rounded in the case's host copies
// first (KvFormat::Pack rounds in place), on the device with the packed row's width.
struct PackedKv {
  qc::PackedRow format;
  int64_t width = 0;
  DeviceBuffer kv, ring, comp;
  PackedKv(Case& c, const model::KvFormat& f) : format(f.codec()), width(f.row_floats()) {
    const int d = c.s.dim;
    auto pack = [&](std::vector<float>& rows) {
      const size_t count = rows.size() / d;
      std::vector<float> out(count * width);
      for (size_t r = 0; r < count; ++r) f.Pack(rows.data() + r * d, out.data() + r * width);
      return Upload(out);
    };
    kv = pack(c.kv);
    ring = pack(c.ring);
    comp = pack(c.comp);
  }
  void Apply(const Case& c, SparseAttentionParams& p) const {
    p.kv = kv.as<float>();
    p.kv_format = format;
    p.window.pool = ring.as<float>();
    p.window.width = width;
    p.window.page_floats = static_cast<int64_t>(c.s.window) * width;
    p.comp.pool = comp.as<float>();
    p.comp.width = width;
    p.comp.page_floats = (int64_t{1} << Case::kRowsShift) * width;
  }
};

struct Result {
  std::vector<float> y, s;
  std::vector<uint16_t> q;
  std::vector<uint8_t> c;  // codes: the FP8-instruction mode's output codes, and their scales
  std::vector<float> cs;
  bool split_ran = false;  // the split workspace was written (the launch split)
};

// One launch of rows [r0, r0 + rows) (tensor_cores: 1 the TC kernel through the dispatch, -1 the
// CUDA-core kernel, 2 LaunchSparseAttentionTc directly), buffers poisoned first. split: the TC
// kernel's tc_split (1: each chunk its own block and the combine kernel, -1: one block per row
// tile, 0: by rows), with a workspace that holds the split (poisoned too); row: the TC kernel's
// tc_row (the FP8 cache's row block: 1 always, -1 never, 0 by rows). codes: the output as the
// FP8-instruction mode's codes (out_c / out_cs) instead of out. prepass: the row block's keys
// pre-decoded first (LaunchRowKeysDecode into a poisoned buffer, SparseAttentionParams::keys16;
// the whole case's rows from position 0: r0 0, rows n, first_pos 0).
Result Launch(const Case& c, int r0, int rows, int tensor_cores, const Stream& st, int split = 0,
              bool kv_bf16 = false, const PackedKv* packed = nullptr, bool qp_bf16 = false,
              int row = 0, bool codes = false, bool prepass = false) {
  const int64_t width = static_cast<int64_t>(c.s.heads) * c.s.dim;
  const int64_t ldc = MmaQuantLd(width), ldcs = MmaScaleLd(rows);
  DeviceBuffer o(rows * width * 4), oq(rows * c.ldq * 2 + 16), os(rows * c.lds * 4 + 16),
      oc(rows * ldc), ocs(MmaScaleCount(rows, width) * 4);
  for (const DeviceBuffer* b : {&o, &oq, &os, &oc, &ocs})
    Memset(b->get(), 0xff, b->bytes(), st.get());
  SparseAttentionParams p = c.Params(r0, rows);
  if (packed != nullptr) packed->Apply(c, p);
  p.out = o.as<float>();
  if (c.s.quant) {
    p.out_q = oq.as<uint16_t>();
    p.out_ldq = c.ldq;
    p.out_s = os.as<float>();
    p.out_lds = c.lds;
  }
  if (codes) {
    p.out_c = oc.as<uint8_t>();
    p.out_ldc = ldc;
    p.out_cs = ocs.as<float>();
    p.out_ldcs = ldcs;
  }
  const int64_t ws_floats = SparseAttentionTcSplitFloats(p);
  DeviceBuffer ws(ws_floats * 4 + 16);
  Memset(ws.get(), 0xff, ws.bytes(), st.get());
  p.tc_split = split;
  p.tc_row = row;
  p.kv_bf16 = kv_bf16;
  p.qp_bf16 = qp_bf16;
  p.tc_workspace = ws.as<float>();
  p.tc_workspace_floats = ws_floats;
  DeviceBuffer keys;
  if (prepass) {
    keys = DeviceBuffer(static_cast<size_t>(2) * rows * c.s.dim * 2);
    Memset(keys.get(), 0xff, keys.bytes(), st.get());
    LaunchRowKeysDecode(p, keys.as<uint16_t>(), st.get());
    p.keys16 = keys.as<uint16_t>();
  }
  if (tensor_cores == 2) {
    LaunchSparseAttentionTc(p, st.get());
  } else {
    p.tensor_cores = tensor_cores;
    LaunchSparseAttention(p, st.get());
  }
  Result r;
  r.y = Download<float>(o, static_cast<size_t>(rows * width), st);
  const auto w = Download<uint32_t>(ws, static_cast<size_t>(ws_floats), st);
  r.split_ran = std::any_of(w.begin(), w.end(), [](uint32_t v) { return v != 0xffffffffu; });
  if (c.s.quant) {
    r.q = Download<uint16_t>(oq, static_cast<size_t>(rows * c.ldq), st);
    r.s = Download<float>(os, static_cast<size_t>(rows * c.lds), st);
  }
  if (codes) {
    r.c = Download<uint8_t>(oc, static_cast<size_t>(rows * ldc), st);
    r.cs = Download<float>(ocs, static_cast<size_t>(MmaScaleCount(rows, width)), st);
  }
  return r;
}

const Shape kFlashCsa = {"flash CSA, selection, RMSNorm+RoPE, act_quant",
                         64,
                         512,
                         64,
                         128,
                         4,
                         true,
                         512,
                         1e-6f,
                         false,
                         true,
                         700,
                         1.0f};

// The TC kernel within 1e-5 of the output's scale of the double reference, as the CUDA-core kernel
// (both printed); and the dispatch's choice: tensor_cores = 1 gives LaunchSparseAttentionTc's
// bits where supported, the CUDA-core kernel's elsewhere.
TEST(SparseAttentionTcTest, MatchesReferenceAndCudaCoreKernel) {
  SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes = {
      kFlashCsa,
      {"flash window only, RoPE alone (V4.1)", 64, 512, 64, 128, 0, false, 0, -1.0f, true, true,
       300, 1.0f},
      {"flash HCA (all entries), pre-applied query", 64, 512, 64, 128, 128, false, 0, -1.0f, false,
       false, 9000, 1.0f},
      {"flash CSA, 1,024 selected (V4.1 counts), big sinks", 64, 512, 64, 128, 4, true, 1024, 1e-6f,
       false, true, 5000, 6.0f},
      {"flash first positions (window inside the call)", 64, 512, 64, 128, 4, true, 512, 1e-6f,
       false, false, 0, 1.0f},
      {"tiny: 4 heads, dim 64, CSA", 4, 64, 16, 16, 4, true, 8, 1e-6f, false, false, 40, 1.0f},
      {"tiny: 8 heads, dim 128, HCA, act_quant", 8, 128, 32, 32, 8, false, 0, 1e-6f, false, true,
       90, 1.0f},
      {"20 heads (a partial tile), dim 192, window only", 20, 192, 64, 64, 0, false, 0, 1e-6f,
       false, false, 100, 1.0f},
      {"head_dim 32: the CUDA-core kernel (fallback)", 4, 32, 16, 16, 4, true, 8, 1e-6f, false,
       false, 40, 1.0f},
  };
  Stream st;
  uint32_t seed = 100;
  for (const Shape& s : shapes) {
    const int n = 6;
    Case c(s, n, seed += 10);
    const auto ref = c.Reference();
    const Result cuda_core = Launch(c, 0, n, -1, st);
    const Result tc = Launch(c, 0, n, 1, st);  // (6 rows: split where the kernel takes it)
    const double e_tc = testing::RelativeError(tc.y, ref);
    const double e_cc = testing::RelativeError(cuda_core.y, ref);
    const double e_pair = testing::RelativeError(tc.y, cuda_core.y);
    std::printf(
        "[ error ] %s: TC vs double %.3g, CUDA cores vs double %.3g, TC vs CUDA cores %.3g\n",
        s.name.c_str(), e_tc, e_cc, e_pair);
    EXPECT_LE(e_tc, 1e-5) << s.name;
    EXPECT_LE(e_cc, 1e-5) << s.name;
    EXPECT_LE(e_pair, 2e-5) << s.name;
    float amax = 0.0f;  // not trivially zero, and every value written (the buffers are poisoned
    int bad = 0;        // with NaNs, which RelativeError's max would pass over)
    for (float v : tc.y) {
      amax = std::max(amax, std::fabs(v));
      bad += std::isfinite(v) ? 0 : 1;
    }
    EXPECT_GT(amax, 1e-3f) << s.name;
    EXPECT_EQ(bad, 0) << s.name << ": non-finite outputs";
    const SparseAttentionParams p = c.Params(0, n);
    if (SparseAttentionTcSupports(p)) {
      const Result direct = Launch(c, 0, n, 2, st);
      EXPECT_EQ(0, std::memcmp(direct.y.data(), tc.y.data(), tc.y.size() * 4)) << s.name;
      // The rows' chunks split over blocks and combined, or folded by one block: the same bits.
      const Result split = Launch(c, 0, n, 2, st, 1), whole = Launch(c, 0, n, 2, st, -1);
      EXPECT_EQ(0, std::memcmp(split.y.data(), whole.y.data(), tc.y.size() * 4)) << s.name;
      EXPECT_EQ(0, std::memcmp(split.y.data(), tc.y.data(), tc.y.size() * 4)) << s.name;
      EXPECT_EQ(split.split_ran, SparseAttentionTcMaxChunks(p) > 1) << s.name;
      EXPECT_FALSE(whole.split_ran) << s.name;
      if (s.quant) {
        EXPECT_EQ(0, std::memcmp(split.q.data(), whole.q.data(), tc.q.size() * 2)) << s.name;
        EXPECT_EQ(0, std::memcmp(split.s.data(), whole.s.data(), tc.s.size() * 4)) << s.name;
      }
      if (s.quant) {
        // The act_quant of the output: as the CUDA-core kernel's of its own output, a function of
        // the output alone; check (q, s) against a second TC launch and that scales are set.
        EXPECT_EQ(0, std::memcmp(direct.q.data(), tc.q.data(), tc.q.size() * 2)) << s.name;
        EXPECT_EQ(0, std::memcmp(direct.s.data(), tc.s.data(), tc.s.size() * 4)) << s.name;
        for (float v : tc.s) EXPECT_TRUE(std::isfinite(v) && v > 0.0f) << s.name;
      }
    } else {
      EXPECT_EQ(0, std::memcmp(cuda_core.y.data(), tc.y.data(), tc.y.size() * 4)) << s.name;
    }
  }
}

// The quantized output is act_quant of the TC kernel's own output: the output of a launch with
// out_q equals that of one without, and (q, s) equal the CUDA-core kernel's act_quant run on it
// (LaunchActQuantRows).
TEST(SparseAttentionTcTest, QuantizedOutputEqualsActQuantAfter) {
  SKIP_WITHOUT_GPU();
  Shape s = kFlashCsa;
  const int n = 5;
  Case c(s, n, 7);
  Stream st;
  const Result with_q = Launch(c, 0, n, 1, st);
  s.quant = false;
  Case c2(s, n, 7);
  const Result without = Launch(c2, 0, n, 1, st);
  ASSERT_EQ(with_q.y.size(), without.y.size());
  EXPECT_EQ(0, std::memcmp(with_q.y.data(), without.y.data(), with_q.y.size() * 4));
  const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
  DeviceBuffer y = Upload(with_q.y), q(n * c.ldq * 2), sc(n * c.lds * 4);
  LaunchActQuantRows(y.as<float>(), width, n, width, q.as<uint16_t>(), sc.as<float>(), st.get());
  const auto q_ref = Download<uint16_t>(q, static_cast<size_t>(n * c.ldq), st);
  const auto s_ref = Download<float>(sc, static_cast<size_t>(n * c.lds), st);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(0, std::memcmp(q_ref.data() + r * c.ldq, with_q.q.data() + r * c.ldq, width * 2))
        << "row " << r;
  EXPECT_EQ(0, std::memcmp(s_ref.data(), with_q.s.data(), s_ref.size() * 4));
}

// The FP8-instruction mode's output codes are its act_quant of the output (LaunchMmaActQuantRows
// on a launch without them), from every kernel: the CUDA-core one, the TC tile (one block a row
// tile, or split over blocks and combined), the FP8 cache's row block; and `out` is left as it
// was (poisoned).
TEST(SparseAttentionTcTest, ModeCodesEqualMmaActQuantAfter) {
  SKIP_WITHOUT_GPU();
  Shape s = kFlashCsa;
  s.quant = false;
  const int n = 130;
  Case c(s, n, 17, false);
  const model::KvFormat f(model::KvQuant::kFp8BfTail, s.dim, 64, s.rope);
  const PackedKv packed(c, f);
  c.UploadAll();
  Stream st;
  const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
  struct Path {
    const char* name;
    int tensor_cores, split;
    const PackedKv* packed;
    int row;
  };
  for (const Path& path :
       {Path{"CUDA-core", -1, 0, nullptr, 0}, Path{"tile", 2, -1, nullptr, -1},
        Path{"split", 2, 1, nullptr, -1}, Path{"row block", 2, -1, &packed, 1}}) {
    const bool fp8 = path.packed != nullptr;  // (the row block: the FP8 cache's bf16 queries)
    const int rows = path.split > 0 ? 5 : n;  // (a split launch's workspace: a few rows)
    const Result plain =
        Launch(c, 0, rows, path.tensor_cores, st, path.split, fp8, path.packed, fp8, path.row);
    const Result coded = Launch(c, 0, rows, path.tensor_cores, st, path.split, fp8, path.packed,
                                fp8, path.row, true);
    if (path.split > 0) {
      EXPECT_TRUE(coded.split_ran) << path.name;
    }
    EXPECT_TRUE(std::all_of(coded.y.begin(), coded.y.end(), [](float v) { return std::isnan(v); }))
        << path.name << ": out written";
    DeviceBuffer y = Upload(plain.y), q(MmaQuantBytes(rows, width)),
                 sc(MmaScaleCount(rows, width) * 4);
    LaunchMmaActQuantRows(y.as<float>(), width, rows, width, q.as<uint8_t>(), sc.as<float>(),
                          st.get());
    const auto q_ref = Download<uint8_t>(q, static_cast<size_t>(MmaQuantBytes(rows, width)), st);
    const auto s_ref = Download<float>(sc, static_cast<size_t>(MmaScaleCount(rows, width)), st);
    EXPECT_EQ(q_ref, coded.c) << path.name;
    for (int64_t b = 0; b < width / 128; ++b)
      EXPECT_EQ(0, std::memcmp(s_ref.data() + b * MmaScaleLd(rows),
                               coded.cs.data() + b * MmaScaleLd(rows), rows * 4))
          << path.name << " block " << b;
  }
}

// Batch invariance: each row of a 300-row launch (1,200 blocks at 64 heads, each folding its
// row's chunks) has exactly the bits of the row launched alone (its chunks split over blocks and
// combined, as a decode step's), output and act_quant, at flash and tiny shapes.
TEST(SparseAttentionTcTest, RowsOfManyEqualRowAlone) {
  SKIP_WITHOUT_GPU();
  const Shape tiny = {"tiny", 8, 128, 32, 32, 8, false, 0, 1e-6f, false, true, 50, 1.0f};
  Stream st;
  for (const Shape& s : {kFlashCsa, tiny}) {
    const int n = 300;
    Case c(s, n, 900);
    const Result all = Launch(c, 0, n, 2, st, -1);
    const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
    int differing = 0;
    for (int r = 0; r < n; ++r) {
      const Result one = Launch(c, r, 1, 2, st, 1);
      bool same = std::memcmp(one.y.data(), all.y.data() + r * width, width * 4) == 0;
      if (s.quant) {
        same = same && std::memcmp(one.q.data(), all.q.data() + r * c.ldq, width * 2) == 0 &&
               std::memcmp(one.s.data(), all.s.data() + r * c.lds, (width / 128) * 4) == 0;
      }
      if (!same && differing++ < 5) ADD_FAILURE() << s.name << ": row " << r << " differs alone";
    }
    EXPECT_EQ(differing, 0) << s.name;
  }
}

// K=V values that are bf16 values (the FP8 cache's): kv_bf16 skips the part products of their
// zero parts, and the bits stay those of the full six products, split or not.
TEST(SparseAttentionTcTest, Bf16KvSkipsZeroPartsWithTheSameBits) {
  SKIP_WITHOUT_GPU();
  const Shape tiny = {"tiny", 8, 128, 32, 32, 8, false, 0, 1e-6f, false, true, 50, 1.0f};
  Stream st;
  for (const Shape& s : {kFlashCsa, tiny}) {
    const int n = 40;
    Case c(s, n, 901, true, true);
    const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
    for (int split : {-1, 1}) {
      const Result full = Launch(c, 0, n, 2, st, split);
      const Result skip = Launch(c, 0, n, 2, st, split, true);
      EXPECT_EQ(std::memcmp(full.y.data(), skip.y.data(), n * width * 4), 0)
          << s.name << " split " << split;
    }
    // Against the double reference as well (the skipped products are zeros, not approximations).
    const Result skip = Launch(c, 0, n, 2, st, -1, true);
    const std::vector<float> ref = c.Reference();
    double scale = 0, err = 0;
    for (float v : ref) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < ref.size(); ++i)
      err = std::max(err, std::fabs(static_cast<double>(skip.y[i]) - ref[i]));
    EXPECT_LE(err, 1e-5 * scale) << s.name;
  }
}

// The FP8 cache's packed K=V rows (kv_format: e4m3 codes, a bf16 tail, scale bytes; rows only
// 8-byte aligned), decoded as the kernels read them: every kernel (CUDA-core, tensor-core in one
// block per row tile or split over chunks, with fp32 or bf16 queries and weights) gives the bits
// it gives on the same values in fp32 rows.
TEST(SparseAttentionTcTest, PackedKvRowsGiveTheUnpackedBits) {
  SKIP_WITHOUT_GPU();
  const Shape tiny = {"tiny", 8, 128, 32, 32, 8, false, 0, 1e-6f, false, true, 50, 1.0f};
  const Shape two_tiles = {"32 heads", 32, 128, 32, 32, 8, true, 24, 1e-6f, false, false, 90, 1.0f};
  Stream st;
  for (const Shape& s : {kFlashCsa, tiny, two_tiles}) {
    const int n = 40;
    Case c(s, n, 907, false);
    const model::KvFormat f(model::KvQuant::kFp8BfTail, s.dim, s.dim == 512 ? 64 : 32, s.rope);
    ASSERT_TRUE(f.packed());
    const PackedKv packed(c, f);  // rounds c's rows first
    c.UploadAll();
    EXPECT_LT(f.row_floats() * 3, s.dim) << "packed rows at least 3x smaller";
    const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
    for (int tc : {-1, 2, 3}) {  // 3: the tensor cores with bf16 queries and weights (qp_bf16)
      for (int split : {-1, 1}) {
        if (tc < 0 && split > 0) continue;
        const bool qp = tc == 3;
        const Result plain = Launch(c, 0, n, qp ? 2 : tc, st, split, true, nullptr, qp);
        const Result pk = Launch(c, 0, n, qp ? 2 : tc, st, split, true, &packed, qp);
        EXPECT_EQ(std::memcmp(plain.y.data(), pk.y.data(), n * width * 4), 0)
            << s.name << " tensor cores " << tc << " split " << split;
        EXPECT_EQ(plain.split_ran, pk.split_ran);
        if (s.quant) {
          EXPECT_EQ(plain.q, pk.q) << s.name;
          EXPECT_EQ(std::memcmp(plain.s.data(), pk.s.data(), plain.s.size() * 4), 0) << s.name;
        }
      }
    }
  }
}

// The FP8 cache's row block (one block per row for all its 16-head tiles; tc_row) gives the
// per-tile blocks' bits, outputs and act_quant alike, for 64 heads (the model's; rows of up to and
// over 1,024 keys), and for 2 and 3 tiles (padded heads) where forced (head_dim 256 or 512: the
// row block's shapes); the default takes it at 64 heads from
// KernelOptions::attention_tc_row_min_rows rows (checked by its launch counter).
TEST(SparseAttentionTcTest, RowBlockGivesTheTileBlocksBits) {
  SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes = {
      kFlashCsa,
      {"flash HCA (all entries), pre-applied query", 64, 512, 64, 128, 128, false, 0, -1.0f, false,
       false, 9000, 1.0f},
      {"20 heads, dim 256, CSA, big sinks", 20, 256, 32, 32, 8, true, 40, -1.0f, false, true, 300,
       6.0f},
      {"40 heads, dim 256, window only", 40, 256, 64, 64, 0, false, 0, 1e-6f, false, false, 80,
       1.0f},
      // Rows of over 1,024 keys: the chunks past the row block's listed key rows.
      {"flash, ratio 4, every entry (1,100+ keys)", 64, 512, 64, 128, 4, false, 0, -1.0f, false,
       false, 4200, 1.0f},
  };
  Stream st;
  uint32_t seed = 950;
  // The row block's P V runs on warpgroup MMA, or on mma.sync under --attention-row-pv=sync
  // (ctest gpu_attention_tc_row_pv_sync; kernel options are fixed before the first launch).
  const std::string path =
      GetKernelOptions().attention_row_pv_wgmma ? " (P V on wgmma)" : " (P V on mma.sync)";
  for (const Shape& s : shapes) {
    const int n = 130;  // past attention_tc_row_min_rows' default: the default's choice runs too
    Case c(s, n, seed += 10, false);
    const model::KvFormat f(model::KvQuant::kFp8BfTail, s.dim, s.dim == 512 ? 64 : 32, s.rope);
    const PackedKv packed(c, f);
    c.UploadAll();
    const Result tiles = Launch(c, 0, n, 2, st, -1, true, &packed, true, -1);
    const std::string what = std::string(s.name) + path;
    const int64_t before = SparseAttentionTcRowLaunches();
    const Result rows = Launch(c, 0, n, 2, st, -1, true, &packed, true, 1);
    EXPECT_GT(SparseAttentionTcRowLaunches(), before) << what << ": the row block ran";
    EXPECT_EQ(std::memcmp(tiles.y.data(), rows.y.data(), tiles.y.size() * 4), 0) << what;
    if (s.quant) {
      EXPECT_EQ(tiles.q, rows.q) << what;
      EXPECT_EQ(std::memcmp(tiles.s.data(), rows.s.data(), tiles.s.size() * 4), 0) << what;
    }
    const int64_t auto_before = SparseAttentionTcRowLaunches();
    const Result by_rows = Launch(c, 0, n, 2, st, -1, true, &packed, true, 0);
    const int64_t min_rows = GetKernelOptions().attention_tc_row_min_rows;
    EXPECT_EQ(SparseAttentionTcRowLaunches() > auto_before,
              s.heads == 64 && min_rows > 0 && n >= min_rows)
        << s.name;
    EXPECT_EQ(std::memcmp(tiles.y.data(), by_rows.y.data(), tiles.y.size() * 4), 0) << s.name;
  }
}

// The row block's key pre-pass (LaunchRowKeysDecode, SparseAttentionParams::keys16: calls whose
// sequences start at position 0) gives the row block's bits, outputs and act_quant alike: CSA
// with a selection, HCA (every entry), window only, head_dim 256 and 512, on rows from 0 (their
// window keys all the call's rows), and rows of over 1,024 keys (past the listed ones). The
// decoded rows go to a poisoned buffer: a key the pre-pass missed would show.
TEST(SparseAttentionTcTest, RowBlockPrepassGivesTheRowBlocksBits) {
  SKIP_WITHOUT_GPU();
  Shape csa = kFlashCsa;
  csa.name = "flash CSA from 0, selection, RMSNorm+RoPE, act_quant";
  csa.first_pos = 0;
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {csa, {130, 300}},
      {{"flash HCA from 0 (all entries), pre-applied query", 64, 512, 64, 128, 128, false, 0, -1.0f,
        false, false, 0, 1.0f},
       {130, 300}},
      {{"flash window only from 0, act_quant", 64, 512, 64, 128, 0, false, 0, 1e-6f, false, true, 0,
        1.0f},
       {130, 300}},
      {{"20 heads, dim 256 from 0, CSA, big sinks", 20, 256, 32, 32, 8, true, 40, -1.0f, false,
        true, 0, 6.0f},
       {130, 300}},
      {{"64 heads, dim 256 from 0, ratio 4, every entry", 64, 256, 64, 128, 4, false, 0, 1e-6f,
        false, false, 0, 1.0f},
       {130}},
      // Rows of over 1,024 keys (32 window keys and pos + 1 entries: positions from 992): the
      // chunks past the row block's listed key rows.
      {{"20 heads, dim 256 from 0, ratio 1, every entry (1,100+ keys)", 20, 256, 32, 32, 1, false,
        0, -1.0f, false, false, 0, 1.0f},
       {1100}},
  };
  Stream st;
  uint32_t seed = 1250;
  const std::string path =
      GetKernelOptions().attention_row_pv_wgmma ? " (P V on wgmma)" : " (P V on mma.sync)";
  // n rows as one sequence, or (sequences 3) as three of 40, 130 and n - 170 rows, each from
  // position 0 in a slot of its own (keys16's entry rows n + seg_begin + e, window rows
  // seg_begin + s).
  for (const auto& [s, ns] : cases) {
    for (const int n : ns) {
      for (const int sequences : {1, 3}) {
        if (sequences == 3 && (n != 300 || s.rate == 1)) continue;
        Case c(s, n, seed += 10, false);
        if (sequences == 3) c.SplitIntoSequences({40, 130, n - 170}, seed + 5);
        const model::KvFormat f(model::KvQuant::kFp8BfTail, s.dim, s.dim == 512 ? 64 : 32, s.rope);
        const PackedKv packed(c, f);
        c.UploadAll();
        const std::string what = s.name + ", " + std::to_string(n) + " rows in " +
                                 std::to_string(sequences) + " sequences" + path;
        const int64_t row_before = SparseAttentionTcRowLaunches();
        const int64_t pre_before = SparseAttentionTcRowPrepassLaunches();
        const Result rows = Launch(c, 0, n, 2, st, -1, true, &packed, true, 1);
        EXPECT_EQ(SparseAttentionTcRowPrepassLaunches(), pre_before) << what;
        const Result pre = Launch(c, 0, n, 2, st, -1, true, &packed, true, 1, false, true);
        EXPECT_EQ(SparseAttentionTcRowLaunches(), row_before + 2) << what << ": the row block ran";
        EXPECT_EQ(SparseAttentionTcRowPrepassLaunches(), pre_before + 1)
            << what << ": the pre-decoded form ran";
        EXPECT_EQ(std::memcmp(rows.y.data(), pre.y.data(), rows.y.size() * 4), 0) << what;
        if (s.quant) {
          EXPECT_EQ(rows.q, pre.q) << what;
          EXPECT_EQ(std::memcmp(rows.s.data(), pre.s.data(), rows.s.size() * 4), 0) << what;
        }
      }
    }
  }
}

// The FP8 cache's attention in the official kernel's precision (qp_bf16: bf16 queries, and each
// key chunk's weights rounded to bf16 relative to the chunk's max) against the CPU's
// AttendHeadBf16, which defines it: within float rounding of the two backends for nearly every
// head (a weight whose fp32 value the backends compute an ulp apart can round to neighbouring
// bf16 values: a few heads differ by up to 2^-8 of that weight's share), and clearly not the
// fp32-query attention (the negative control: the rounding is there). Split or not, and a row
// alone or among 300, the same bits.
TEST(SparseAttentionTcTest, Bf16QueriesAndWeightsAsTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<Shape> shapes = {
      {"flash CSA, pre-applied query, act_quant", 64, 512, 64, 128, 4, true, 512, -1.0f, false,
       true, 3000, 1.0f},
      {"flash HCA (all entries), pre-applied query", 64, 512, 64, 128, 128, false, 0, -1.0f, false,
       false, 9000, 1.0f},
      {"tiny: 20 heads, dim 128, CSA, big sinks", 20, 128, 32, 32, 8, true, 40, -1.0f, false, false,
       300, 6.0f},
  };
  Stream st;
  uint32_t seed = 700;
  for (const Shape& s : shapes) {
    const int n = 6, d = s.dim, roff = d - s.rope;
    Case c(s, n, seed += 10, true, true);
    const Result qp = Launch(c, 0, n, 2, st, -1, true, nullptr, true);
    const Result fp32_q = Launch(c, 0, n, 2, st, -1, true);
    // The CPU: AttendHeadBf16 per (row, head), then the inverse RoPE of the rope dims.
    std::vector<float> cpu(qp.y.size());
    for (int t = 0; t < n; ++t) {
      const std::vector<const float*> keys = c.Keys(t);
      for (int h = 0; h < s.heads; ++h) {
        const size_t at = (static_cast<size_t>(t) * s.heads + h) * d;
        float* o = cpu.data() + at;
        cpu::AttendHeadBf16(c.q.data() + at, keys, d, 1.0f / std::sqrt(static_cast<float>(d)),
                            c.sink[h], o);
        for (int j = 0; j < s.rope / 2; ++j) {
          const double a = static_cast<double>(static_cast<float>(c.pos[t]) * c.inv[j]);
          const double x0 = o[roff + 2 * j], x1 = o[roff + 2 * j + 1];
          o[roff + 2 * j] = static_cast<float>(x0 * std::cos(a) + x1 * std::sin(a));
          o[roff + 2 * j + 1] = static_cast<float>(-x0 * std::sin(a) + x1 * std::cos(a));
        }
      }
    }
    double scale = 0;
    for (float v : cpu) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    ASSERT_GT(scale, 1e-3) << s.name;
    // Per head row: its largest difference from the CPU (qp) and from the fp32-query output.
    int close = 0, close_fp32 = 0, bad = 0;
    double worst = 0;
    const int heads_total = n * s.heads;
    for (int r = 0; r < heads_total; ++r) {
      double e = 0, e32 = 0;
      for (int i = 0; i < d; ++i) {
        const size_t k = static_cast<size_t>(r) * d + i;
        e = std::max(e, std::fabs(static_cast<double>(qp.y[k]) - cpu[k]));
        e32 = std::max(e32, std::fabs(static_cast<double>(fp32_q.y[k]) - cpu[k]));
        bad += std::isfinite(qp.y[k]) ? 0 : 1;
      }
      worst = std::max(worst, e);
      close += e <= 1e-5 * scale;
      close_fp32 += e32 <= 1e-5 * scale;
    }
    std::printf(
        "[ qp_bf16 ] %s: %d of %d heads within 1e-5 of the CPU (fp32 queries: %d), worst %.3g\n",
        s.name.c_str(), close, heads_total, close_fp32, worst / scale);
    EXPECT_EQ(bad, 0) << s.name;
    EXPECT_GE(close, heads_total * 95 / 100) << s.name;
    EXPECT_LE(worst, 4e-3 * scale) << s.name;
    EXPECT_LE(close_fp32, heads_total / 2) << s.name << ": the rounding made no difference";
    // Split over chunks and combined: the same bits.
    const Result split = Launch(c, 0, n, 2, st, 1, true, nullptr, true);
    EXPECT_TRUE(split.split_ran) << s.name;
    EXPECT_EQ(std::memcmp(split.y.data(), qp.y.data(), qp.y.size() * 4), 0) << s.name;
    if (s.quant) {
      EXPECT_EQ(split.q, qp.q) << s.name;
    }
  }
  // Batch invariance: each row of 300 as that row alone (split, as a decode step's).
  Shape s = shapes[0];
  const int n = 300;
  Case c(s, n, 905, true, true);
  const Result all = Launch(c, 0, n, 2, st, -1, true, nullptr, true);
  const int64_t width = static_cast<int64_t>(s.heads) * s.dim;
  int differing = 0;
  for (int r = 0; r < n; ++r) {
    const Result one = Launch(c, r, 1, 2, st, 1, true, nullptr, true);
    const bool same = std::memcmp(one.y.data(), all.y.data() + r * width, width * 4) == 0 &&
                      std::memcmp(one.q.data(), all.q.data() + r * c.ldq, width * 2) == 0;
    if (!same && differing++ < 5) ADD_FAILURE() << "row " << r << " differs alone";
  }
  EXPECT_EQ(differing, 0);
}

// qp_bf16 outside its shapes or without bf16 K=V values is refused, not computed otherwise.
TEST(SparseAttentionTcTest, Bf16QueriesAndWeightsNeedTheirShapes) {
  SparseAttentionParams p;
  p.heads = 8;
  p.dim = 128;
  p.rope_dim = 32;
  p.qp_bf16 = true;
  EXPECT_FALSE(p.Validate().ok());  // kv_bf16 not set
  p.kv_bf16 = true;
  EXPECT_TRUE(p.Validate().ok());
  p.dim = 96;
  EXPECT_FALSE(p.Validate().ok());  // not a multiple of 64
  p.dim = 256;
  p.rope_dim = 128;
  EXPECT_TRUE(p.Validate().ok());
  p.rope_dim = 130;
  EXPECT_FALSE(p.Validate().ok());  // past the kernels' RoPE table
}

}  // namespace
}  // namespace dsinfer::backend::cuda
