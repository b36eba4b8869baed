// The model step's CUDA ops other than the linears (gpu_ops_test.cc), against the CPU backend:
// the sparse attention's and RMSNorm's quantized outputs (exactly act_quant after them), the mHC
// pre finish and post (the next mix, the folded MoE combine, many rows against a row alone), the
// MoE grouping and routing, and GPU sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/sample.cuh"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "io/model_config.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

// Max-relative error against a reference, printed for the record.
double Err(const std::vector<float>& got, const std::vector<float>& ref, const char* what) {
  const double e = testing::RelativeError(got, ref);
  std::printf("[ error ] %s: %.3g\n", what, e);
  return e;
}

// A device output (fp32 rows) and its act_quant (q f16, s per 128 columns), copied to the host.
struct QuantizedCopy {
  std::vector<float> y, s;
  std::vector<uint16_t> q;
};
QuantizedCopy Download(const DeviceBuffer& y, const DeviceBuffer& q, const DeviceBuffer& sc,
                       Stream& st) {
  QuantizedCopy c;
  c.y.resize(y.bytes() / 4);
  c.q.resize(q.bytes() / 2);
  c.s.resize(sc.bytes() / 4);
  CopyToHost(c.y.data(), y.get(), y.bytes(), st.get());
  CopyToHost(c.q.data(), q.get(), q.bytes(), st.get());
  CopyToHost(c.s.data(), sc.get(), sc.bytes(), st.get());
  st.Synchronize();
  return c;
}
// The same bits: all of y and s, the first `cols` values of each of the `rows` q rows (ldq apart).
void ExpectSameBits(const QuantizedCopy& a, const QuantizedCopy& b, int64_t rows, int64_t cols,
                    int64_t ldq, const std::string& what) {
  EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4)) << what << ": y";
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(0, std::memcmp(a.q.data() + r * ldq, b.q.data() + r * ldq, cols * 2))
        << what << ": q row " << r;
  EXPECT_EQ(0, std::memcmp(a.s.data(), b.s.data(), a.s.size() * 4)) << what << ": scales";
}

// One sequence of n rows (ids 5.., positions 0..) through the sparse attention's window of 128
// keys, heads x dim wide, random queries, keys and sinks from `seed`: the inputs on the device and
// the launch parameters, without outputs.
struct OneSequenceAttention {
  int64_t width, ldq, lds;
  DeviceBuffer di, dp, ds, db, dst, dc, dq, dkv, dsink, dinv, ring, page0;
  SparseAttentionParams p;
  OneSequenceAttention(int n, int heads, int dim, int rope, uint32_t seed) {
    width = static_cast<int64_t>(heads) * dim;
    ldq = QuantizedLd(width);
    lds = QuantizedScales(width);
    std::vector<int32_t> ids(n), pos(n), slot(n, 0), begin(n, 0), start(n, 0), count(n, n);
    for (int i = 0; i < n; ++i) {
      ids[i] = 5 + i;
      pos[i] = i;
    }
    std::vector<float> inv(rope / 2);
    for (int j = 0; j < rope / 2; ++j) inv[j] = std::pow(10000.0f, -2.0f * j / rope);
    di = Upload(ids);
    dp = Upload(pos);
    ds = Upload(slot);
    db = Upload(begin);
    dst = Upload(start);
    dc = Upload(count);
    dq = Upload(testing::RandomVector(static_cast<size_t>(n * width), seed));
    dkv = Upload(testing::RandomVector(static_cast<size_t>(n * dim), seed + 1));
    dsink = Upload(testing::RandomVector(heads, seed + 2));
    dinv = Upload(inv);
    ring = DeviceBuffer(128 * dim * 4);
    page0 = Upload(std::vector<int32_t>{0});
    p.meta.ids = di.as<int32_t>();
    p.meta.pos = dp.as<int32_t>();
    p.meta.slot = ds.as<int32_t>();
    p.meta.seg_begin = db.as<int32_t>();
    p.meta.seg_start = dst.as<int32_t>();
    p.meta.seg_count = dc.as<int32_t>();
    p.meta.n = n;
    p.q = dq.as<float>();
    p.q_norm_eps = 1e-6f;
    p.kv = dkv.as<float>();
    p.window.pool = ring.as<float>();
    p.window.cap = 128;
    p.window.width = dim;
    p.window.page_floats = 128 * dim;  // the sequence's one window page: page 0
    p.window.pages = page0.as<int32_t>();
    p.window.pages_stride = 1;
    p.window_size = 128;
    p.heads = heads;
    p.dim = dim;
    p.sink = dsink.as<float>();
    p.scale = 1.0f / std::sqrt(static_cast<float>(dim));
    p.rope_dim = rope;
    p.inv_freq = dinv.as<float>();
  }
  // The launch writes o and, when q is given, its act_quant (q, s) too.
  void Outputs(const DeviceBuffer& o, const DeviceBuffer* q, const DeviceBuffer* s) {
    p.out = o.as<float>();
    p.out_q = q ? q->as<uint16_t>() : nullptr;
    p.out_ldq = ldq;
    p.out_s = s ? s->as<float>() : nullptr;
    p.out_lds = lds;
  }
};

// The output is not trivially zero.
void ExpectNonzero(const std::vector<float>& y) {
  float amax = 0.0f;
  for (float v : y) amax = std::max(amax, std::fabs(v));
  EXPECT_GT(amax, 1e-3f);
}

// The attention kernel's quantized output (for wo_a): the output itself unchanged, and (q, s)
// exactly act_quant of it over each token's heads * dim columns.
TEST(SparseAttentionTest, QuantizedOutputEqualsActQuantAfter) {
  SKIP_WITHOUT_GPU();
  const int n = 3;
  OneSequenceAttention at(n, /*heads=*/4, /*dim=*/512, /*rope=*/64, 71);
  const int64_t width = at.width, ldq = at.ldq, lds = at.lds;
  DeviceBuffer o1(n * width * 4), o2(n * width * 4), q1(n * ldq * 2), q2(n * ldq * 2),
      s1(n * lds * 4), s2(n * lds * 4);
  Stream s;
  at.Outputs(o1, nullptr, nullptr);
  LaunchSparseAttention(at.p, s.get());
  LaunchActQuantRows(o1.as<float>(), width, n, width, q1.as<uint16_t>(), s1.as<float>(), s.get());
  at.Outputs(o2, &q2, &s2);
  LaunchSparseAttention(at.p, s.get());
  const QuantizedCopy a = Download(o1, q1, s1, s), b = Download(o2, q2, s2, s);
  ExpectSameBits(a, b, n, width, ldq, "attention");
  ExpectNonzero(a.y);
}

// Heads per block is a launch choice only: 1, 2 and 4 heads per block (and the default for the
// rows) give the same bits for the output and its act_quant, on rows whose windows span several
// rounds of the warps' key spans.
TEST(SparseAttentionTest, HeadsPerBlockGiveTheSameBits) {
  SKIP_WITHOUT_GPU();
  const int n = 150;
  OneSequenceAttention at(n, /*heads=*/8, /*dim=*/512, /*rope=*/64, 81);
  const int64_t width = at.width, ldq = at.ldq, lds = at.lds;
  Stream s;
  std::vector<QuantizedCopy> runs;
  for (const int g : {1, 2, 4, 0}) {
    DeviceBuffer o(n * width * 4), oq(n * ldq * 2), os(n * lds * 4);
    // Poison: every value must be written by the launch (the previous run's buffers may come back
    // from the allocator holding the same bits).
    Memset(o.get(), 0xff, o.bytes(), s.get());
    Memset(oq.get(), 0xff, oq.bytes(), s.get());
    Memset(os.get(), 0xff, os.bytes(), s.get());
    at.Outputs(o, &oq, &os);
    at.p.heads_per_block = g;
    LaunchSparseAttention(at.p, s.get());
    runs.push_back(Download(o, oq, os, s));
  }
  for (size_t i = 1; i < runs.size(); ++i)
    ExpectSameBits(runs[0], runs[i], n, width, ldq, "heads per block run " + std::to_string(i));
  ExpectNonzero(runs[0].y);
}

// RMSNorm with quantized rows: y as without them and (q, s) exactly act_quant of y, in place and
// not, with and without a weight, widths of each block size and a partial last 128 columns.
TEST(RmsNormTest, QuantizedRowsEqualActQuantAfter) {
  SKIP_WITHOUT_GPU();
  for (const int64_t dim : {1024, 4096, 200, 132}) {
    for (const bool in_place : {false, true}) {
      for (const bool weighted : {true, false}) {
        const int64_t rows = 5, ldq = QuantizedLd(dim), lds = QuantizedScales(dim);
        auto x = testing::RandomVector(static_cast<size_t>(rows * dim), 61);
        auto w = testing::RandomVector(static_cast<size_t>(dim), 62);
        DeviceBuffer xd = Upload(x), wd = Upload(w), y1(x.size() * 4), y2(x.size() * 4),
                     q1(rows * ldq * 2), q2(rows * ldq * 2), s1(rows * lds * 4), s2(rows * lds * 4);
        Stream s;
        RmsNormParams p;
        p.x = xd.as<float>();
        p.ldx = dim;
        p.y = y1.as<float>();
        p.ldy = dim;
        p.rows = rows;
        p.dim = dim;
        p.weight = weighted ? wd.as<float>() : nullptr;
        p.eps = 1e-6f;
        LaunchRmsNorm(p, s.get());
        LaunchActQuantRows(y1.as<float>(), dim, rows, dim, q1.as<uint16_t>(), s1.as<float>(),
                           s.get());
        if (in_place) {
          CopyToDeviceSync(y2.get(), x.data(), x.size() * 4);
          p.x = y2.as<float>();
        }
        p.y = y2.as<float>();
        p.q = q2.as<uint16_t>();
        p.ldq = ldq;
        p.s = s2.as<float>();
        p.lds = lds;
        LaunchRmsNorm(p, s.get());
        ExpectSameBits(Download(y1, q1, s1, s), Download(y2, q2, s2, s), rows, dim, ldq,
                       "dim " + std::to_string(dim) + (in_place ? " in place" : "") +
                           (weighted ? " weighted" : ""));
      }
    }
  }
}

// A config with hc = 4 streams of width D and V4's Sinkhorn iterations.
io::DeepseekV4Config HcConfig(int64_t D) {
  io::DeepseekV4Config c;
  c.hc_mult = 4;
  c.hidden_size = static_cast<int>(D);
  c.hc_sinkhorn_iters = 20;
  return c;
}

// RMSNorm (no weight) of each of the n rows of u [n, D], in double: the finish's xn reference.
std::vector<float> RmsNormRows(const std::vector<float>& u, int64_t n, int64_t D, double eps) {
  std::vector<float> out(n * D);
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += double(u[t * D + d]) * u[t * D + d];
    const double r = 1.0 / std::sqrt(ss / D + eps);
    for (int64_t d = 0; d < D; ++d) out[t * D + d] = static_cast<float>(u[t * D + d] * r);
  }
  return out;
}

// Random mHC pre weights for hc = 4 streams of width D (fn, base; scale as given).
model::deepseek_v4::HyperConnectionWeights RandomHcWeights(int64_t D, uint32_t seed,
                                                           std::vector<float> scale) {
  const int64_t nout = 6 * 4, K = 4 * D;
  model::deepseek_v4::HyperConnectionWeights w;
  w.fn = testing::RandomVector(static_cast<size_t>(nout * K), seed, 0.05f);
  w.base = testing::RandomVector(nout, seed + 1, 0.5f);
  w.scale = std::move(scale);
  return w;
}

// Those weights on the device.
struct DeviceHcWeights {
  DeviceBuffer fn, base, scale;
  explicit DeviceHcWeights(const model::deepseek_v4::HyperConnectionWeights& w)
      : fn(w.fn.size() * 4), base(w.base.size() * 4), scale(w.scale.size() * 4) {
    CopyToDeviceSync(fn.get(), w.fn.data(), fn.bytes());
    CopyToDeviceSync(base.get(), w.base.data(), base.bytes());
    CopyToDeviceSync(scale.get(), w.scale.data(), scale.bytes());
  }
};

// HcMix's partials of n tokens' streams X [n, K] with the weights' fn into part.
void LaunchMix(const DeviceHcWeights& w, const float* X, int64_t n, int64_t K, int nout,
               float* part, Stream& s) {
  HcMixParams m;
  m.X = X;
  m.ldx = K;
  m.K = K;
  m.fn = w.fn.as<float>();
  m.nout = nout;
  m.n = n;
  m.part = part;
  LaunchHcMix(m, s.get());
}

// The finish of n tokens from mix partials `part` (mix_slices 0: HcMix's) over streams X.
HcPreFinishParams FinishParams(const io::DeepseekV4Config& c, const DeviceHcWeights& w,
                               const float* part, int64_t mix_slices, const float* X, int64_t n,
                               float* xn, float* post, float* comb) {
  HcPreFinishParams f;
  f.part = part;
  f.mix_slices = mix_slices;
  f.rms_eps = static_cast<float>(c.rms_norm_eps);
  f.xn = xn;
  f.base = w.base.as<float>();
  f.scale = w.scale.as<float>();
  f.X = X;
  f.post = post;
  f.comb = comb;
  f.n = n;
  f.hc = c.hc_mult;
  f.D = c.hidden_size;
  f.sinkhorn_iters = c.hc_sinkhorn_iters;
  f.hc_eps = static_cast<float>(c.hc_eps);
  return f;
}

// The mHC pre step on the GPU (mix partials, then the finish: collapse + RMSNorm, post, and the
// Sinkhorn comb) against the CPU model's HcPre, for the split finish (D = 4,096: four clustered
// blocks share the mix reduction and collapse; the Sinkhorn in a cluster of its own up to 256 rows,
// on block 0 after the collapse above, so 300 rows against the last row alone compares the two)
// and the one-block finish (D = 256); each token alone gives the same bits as in the batch.
TEST(HcTest, PreFinishMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [D, n] : {std::pair<int64_t, int64_t>{4096, 3}, {4096, 300}, {256, 3}}) {
    SCOPED_TRACE("D " + std::to_string(D) + " n " + std::to_string(n));
    const io::DeepseekV4Config c = HcConfig(D);
    const int hc = 4, nout = (2 + hc) * hc;
    const int64_t K = hc * D;
    const auto w = RandomHcWeights(D, 5, {0.7f, 1.1f, 0.9f});
    const auto X = testing::RandomVector(static_cast<size_t>(n * K), 7, 1.0f);
    std::vector<float> u(n * D), post(n * hc), comb(n * hc * hc);
    model::deepseek_v4::HcPre(w, c, X.data(), n, u.data(), post.data(), comb.data(), nullptr);
    const std::vector<float> want = RmsNormRows(u, n, D, c.rms_norm_eps);
    const DeviceHcWeights dw(w);
    DeviceBuffer xd(X.size() * 4), part(n * HcMixSlices(K) * (nout + 1) * 4), xn(n * D * 4),
        pd(n * hc * 4), cd(n * hc * hc * 4);
    CopyToDeviceSync(xd.get(), X.data(), X.size() * 4);
    Stream s;
    auto run = [&](int64_t t0, int64_t rows, std::vector<float>* xo, std::vector<float>* po,
                   std::vector<float>* co) {
      LaunchMix(dw, xd.as<float>() + t0 * K, rows, K, nout, part.as<float>(), s);
      LaunchHcPreFinish(FinishParams(c, dw, part.as<float>(), 0, xd.as<float>() + t0 * K, rows,
                                     xn.as<float>(), pd.as<float>(), cd.as<float>()),
                        s.get());
      xo->resize(rows * D);
      po->resize(rows * hc);
      co->resize(rows * hc * hc);
      CopyToHost(xo->data(), xn.get(), xo->size() * 4, s.get());
      CopyToHost(po->data(), pd.get(), po->size() * 4, s.get());
      CopyToHost(co->data(), cd.get(), co->size() * 4, s.get());
      s.Synchronize();
    };
    std::vector<float> gx, gp, gc;
    run(0, n, &gx, &gp, &gc);
    EXPECT_LE(Err(gx, want, "hc pre xn"), 1e-5) << "D=" << D;
    EXPECT_LE(Err(gp, post, "hc pre post"), 1e-5) << "D=" << D;
    EXPECT_LE(Err(gc, comb, "hc pre comb"), 1e-5) << "D=" << D;
    std::vector<float> ox, op, oc;
    run(n - 1, 1, &ox, &op, &oc);
    EXPECT_EQ(0, std::memcmp(ox.data(), gx.data() + (n - 1) * D, D * 4)) << "D=" << D;
    EXPECT_EQ(0, std::memcmp(oc.data(), gc.data() + (n - 1) * hc * hc, hc * hc * 4)) << "D=" << D;
    EXPECT_EQ(0, std::memcmp(op.data(), gp.data() + (n - 1) * hc, hc * 4)) << "D=" << D;
  }
}

// The finish with quantized rows (HcPreFinishParams::xq): xn as without them and (q, s) exactly
// act_quant of xn, for the split finish (D = 4,096 and 2,048: in the kernel) and the one-block
// finish (D = 256: the pre-pass), with and without the sublayer norm weight. The same for the
// FP8-instruction mode's form (xc / xcs): LaunchMmaActQuantRows' codes and scales of xn.
TEST(HcTest, PreFinishQuantizedRowsEqualActQuantAfter) {
  SKIP_WITHOUT_GPU();
  for (const int64_t D : {int64_t{4096}, int64_t{2048}, int64_t{256}}) {
    for (const bool weighted : {true, false}) {
      const io::DeepseekV4Config c = HcConfig(D);
      const int hc = 4, nout = (2 + hc) * hc;
      const int64_t n = 3, K = hc * D, ldq = QuantizedLd(D), lds = QuantizedScales(D);
      const auto w = RandomHcWeights(D, 25, {0.7f, 1.1f, 0.9f});
      const auto X = testing::RandomVector(static_cast<size_t>(n * K), 27, 1.0f);
      const auto nw = testing::RandomVector(static_cast<size_t>(D), 28, 1.0f);
      const DeviceHcWeights dw(w);
      DeviceBuffer xd = Upload(X), nwd = Upload(nw), part(n * HcMixSlices(K) * (nout + 1) * 4),
                   x1(n * D * 4), x2(n * D * 4), q1(n * ldq * 2), q2(n * ldq * 2), s1(n * lds * 4),
                   s2(n * lds * 4), pd(n * hc * 4), cd(n * hc * hc * 4);
      Stream s;
      LaunchMix(dw, xd.as<float>(), n, K, nout, part.as<float>(), s);
      HcPreFinishParams f = FinishParams(c, dw, part.as<float>(), 0, xd.as<float>(), n,
                                         x1.as<float>(), pd.as<float>(), cd.as<float>());
      f.norm_w = weighted ? nwd.as<float>() : nullptr;
      LaunchHcPreFinish(f, s.get());
      LaunchActQuantRows(x1.as<float>(), D, n, D, q1.as<uint16_t>(), s1.as<float>(), s.get());
      f.xn = x2.as<float>();
      f.xq = q2.as<uint16_t>();
      f.ldq = ldq;
      f.xs = s2.as<float>();
      f.lds = lds;
      LaunchHcPreFinish(f, s.get());
      const QuantizedCopy a = Download(x1, q1, s1, s), b = Download(x2, q2, s2, s);
      const std::string name = "D " + std::to_string(D) + (weighted ? " weighted" : "");
      ExpectSameBits(a, b, n, D, ldq, name);
      ExpectNonzero(a.y);  // the rows are not trivially zero
      const int64_t cb = MmaQuantBytes(n, D), cn = MmaScaleCount(n, D);
      DeviceBuffer c1(cb), c2(cb), cs1(cn * 4), cs2(cn * 4);
      const QuantizedRows want = LaunchMmaActQuantRows(x1.as<float>(), D, n, D, c1.as<uint8_t>(),
                                                       cs1.as<float>(), s.get());
      Memset(c2.get(), 0xff, cb, s.get());
      Memset(cs2.get(), 0xff, cn * 4, s.get());
      f.xq = nullptr;
      f.xc = c2.as<uint8_t>();
      f.ldc = want.ldc;
      f.xcs = cs2.as<float>();
      f.ldcs = want.ldcs;
      LaunchHcPreFinish(f, s.get());
      EXPECT_EQ(Download<uint8_t>(c1, cb, s), Download<uint8_t>(c2, cb, s)) << name;
      const auto sa = Download<float>(cs1, cn, s), sb = Download<float>(cs2, cn, s);
      for (int64_t blk = 0; blk < D / 128; ++blk)
        EXPECT_EQ(0, std::memcmp(sa.data() + blk * want.ldcs, sb.data() + blk * want.ldcs, n * 4))
            << name << " block " << blk;
    }
  }
}

// HcPost of n tokens with the next mix's partials (mix_fn, mix_part), y the sublayer rows.
HcPostParams PostParams(const float* y, const float* post, const float* comb, float* X, int64_t n,
                        int hc, int64_t D, const float* mix_fn, float* mix_part) {
  HcPostParams hp;
  hp.y = y;
  hp.post = post;
  hp.comb = comb;
  hp.X = X;
  hp.n = n;
  hp.hc = hc;
  hp.D = D;
  hp.mix_fn = mix_fn;
  hp.mix_part = mix_part;
  return hp;
}

// HcPost with the next HcPre's mix folded in (HcPostMixSlices), then the finish from those
// partials: the CPU's HcPost followed by its HcPre.
TEST(HcTest, PostComputesNextMix) {
  SKIP_WITHOUT_GPU();
  for (const int64_t D : {int64_t{4096}, int64_t{128}}) {
    const io::DeepseekV4Config c = HcConfig(D);
    const int hc = 4, nout = (2 + hc) * hc;
    const int64_t n = 2, K = hc * D, slices = HcPostMixSlices(hc, D);
    ASSERT_GT(slices, 0);
    const auto w = RandomHcWeights(D, 15, {0.8f, 1.2f, 0.6f});
    auto X = testing::RandomVector(static_cast<size_t>(n * K), 17, 1.0f);
    const auto y = testing::RandomVector(static_cast<size_t>(n * D), 18, 1.0f);
    auto post = testing::RandomVector(static_cast<size_t>(n * hc), 19, 1.0f);
    auto comb = testing::RandomVector(static_cast<size_t>(n * hc * hc), 20, 0.5f);
    const DeviceHcWeights dw(w);
    DeviceBuffer xd(X.size() * 4), yd(y.size() * 4), pd(post.size() * 4), cd(comb.size() * 4),
        part(n * slices * (nout + 1) * 4), xn(n * D * 4), po(n * hc * 4), co(n * hc * hc * 4);
    CopyToDeviceSync(xd.get(), X.data(), X.size() * 4);
    CopyToDeviceSync(yd.get(), y.data(), y.size() * 4);
    CopyToDeviceSync(pd.get(), post.data(), post.size() * 4);
    CopyToDeviceSync(cd.get(), comb.data(), comb.size() * 4);
    Stream s;
    HcPostParams hp = PostParams(yd.as<float>(), pd.as<float>(), cd.as<float>(), xd.as<float>(), n,
                                 hc, D, dw.fn.as<float>(), part.as<float>());
    LaunchHcPost(hp, s.get());
    LaunchHcPreFinish(FinishParams(c, dw, part.as<float>(), slices, xd.as<float>(), n,
                                   xn.as<float>(), po.as<float>(), co.as<float>()),
                      s.get());
    std::vector<float> gX(X.size()), gx(n * D), gp(n * hc), gc(n * hc * hc);
    CopyToHost(gX.data(), xd.get(), gX.size() * 4, s.get());
    CopyToHost(gx.data(), xn.get(), gx.size() * 4, s.get());
    CopyToHost(gp.data(), po.get(), gp.size() * 4, s.get());
    CopyToHost(gc.data(), co.get(), gc.size() * 4, s.get());
    s.Synchronize();
    model::deepseek_v4::HcPost(c, y.data(), post.data(), comb.data(), n, X.data());
    std::vector<float> u(n * D), wp(n * hc), wc(n * hc * hc);
    model::deepseek_v4::HcPre(w, c, X.data(), n, u.data(), wp.data(), wc.data(), nullptr);
    const std::vector<float> want = RmsNormRows(u, n, D, c.rms_norm_eps);
    EXPECT_LE(Err(gX, X, "hc post X"), 1e-6) << "D=" << D;
    EXPECT_LE(Err(gx, want, "hc post+pre xn"), 1e-5) << "D=" << D;
    EXPECT_LE(Err(gp, wp, "hc post+pre post"), 1e-5) << "D=" << D;
    EXPECT_LE(Err(gc, wc, "hc post+pre comb"), 1e-5) << "D=" << D;
  }
}

// HcPost with the MoE combine folded in (y null, moe set: the post kernels stage each token's
// combine order once) gives the bits of LaunchMoeCombine's rows fed as y: the streams and the
// next mix's partials, for the many-row launch (16 tokens a block) and a few rows; expert ids
// with repeats and ties (the combine's rank order), with and without the shared expert's rows.
TEST(HcTest, PostWithFoldedCombineEqualsCombineThenPost) {
  SKIP_WITHOUT_GPU();
  const int64_t D = 256;
  const int hc = 4, nout = (2 + hc) * hc, K = 6;
  // 4,097 rows: the 32-token launch's last block has one token (the ring's empty copy groups).
  for (const int64_t n : {kHcPostMixManyRows + 21, kHcPostMixWideRows + 1, int64_t{3}}) {
    for (const bool shared : {true, false}) {
      const int64_t HK = hc * D, slices = HcPostMixSlices(hc, D), pw = slices * (nout + 1);
      const auto w = RandomHcWeights(D, 45, {0.8f, 1.2f, 0.6f});
      const auto X = testing::RandomVector(static_cast<size_t>(n * HK), 47, 1.0f);
      const auto ey = testing::RandomVector(static_cast<size_t>(n * K * D), 48, 1.0f);
      const auto sh = testing::RandomVector(static_cast<size_t>(n * D), 49, 1.0f);
      const auto wt = testing::RandomVector(static_cast<size_t>(n * K), 50, 1.0f);
      const auto post = testing::RandomVector(static_cast<size_t>(n * hc), 51, 1.0f);
      const auto comb = testing::RandomVector(static_cast<size_t>(n * hc * hc), 52, 0.5f);
      std::vector<int32_t> sel(static_cast<size_t>(n * K));
      // 6 of 4 ids a token: repeats (the rank order's tie to the lower k) in every token.
      for (size_t i = 0; i < sel.size(); ++i) sel[i] = static_cast<int32_t>((i * 37 + i / 5) % 4);
      const DeviceHcWeights dw(w);
      DeviceBuffer x1 = Upload(X), x2 = Upload(X), eyd = Upload(ey), shd = Upload(sh),
                   wtd = Upload(wt), seld = Upload(sel), pd = Upload(post), cd = Upload(comb),
                   yd(n * D * 4), part1(n * pw * 4), part2(n * pw * 4);
      Stream s;
      MoeCombineParams mc;
      mc.y = eyd.as<float>();
      mc.sel = seld.as<int32_t>();
      mc.weight = wtd.as<float>();
      mc.shared = shared ? shd.as<float>() : nullptr;
      mc.out = yd.as<float>();
      mc.n = n;
      mc.K = K;
      mc.D = D;
      LaunchMoeCombine(mc, s.get());
      HcPostParams hp = PostParams(yd.as<float>(), pd.as<float>(), cd.as<float>(), x1.as<float>(),
                                   n, hc, D, dw.fn.as<float>(), part1.as<float>());
      LaunchHcPost(hp, s.get());
      hp.y = nullptr;
      hp.moe = mc;
      hp.X = x2.as<float>();
      hp.mix_part = part2.as<float>();
      LaunchHcPost(hp, s.get());
      std::vector<float> a(n * HK), b(n * HK), pa(n * pw), pb(n * pw);
      CopyToHost(a.data(), x1.get(), a.size() * 4, s.get());
      CopyToHost(b.data(), x2.get(), b.size() * 4, s.get());
      CopyToHost(pa.data(), part1.get(), pa.size() * 4, s.get());
      CopyToHost(pb.data(), part2.get(), pb.size() * 4, s.get());
      s.Synchronize();
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << n << " " << shared;
      EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), pa.size() * 4)) << n << " " << shared;
      EXPECT_NE(0, std::memcmp(a.data(), X.data(), a.size() * 4));  // the streams were updated
    }
  }
}

// The post with the next mix over many rows (kHcPostMixManyRows and more: 16 tokens per block;
// kHcPostMixWideRows and more: 32) gives each row the bits of the row run alone (one token per
// block): the new streams and the mix partials.
void CheckPostMixManyRows(int64_t n) {
  SCOPED_TRACE("n " + std::to_string(n));
  const int64_t D = 256;
  const int hc = 4, nout = (2 + hc) * hc;
  const int64_t K = hc * D, slices = HcPostMixSlices(hc, D), pw = slices * (nout + 1);
  ASSERT_GT(slices, 0);
  const auto w = RandomHcWeights(D, 25, {0.8f, 1.2f, 0.6f});
  const auto X = testing::RandomVector(static_cast<size_t>(n * K), 27, 1.0f);
  const auto y = testing::RandomVector(static_cast<size_t>(n * D), 28, 1.0f);
  const auto post = testing::RandomVector(static_cast<size_t>(n * hc), 29, 1.0f);
  const auto comb = testing::RandomVector(static_cast<size_t>(n * hc * hc), 30, 0.5f);
  const DeviceHcWeights dw(w);
  DeviceBuffer xd = Upload(X), x1 = Upload(X), yd = Upload(y), pd = Upload(post), cd = Upload(comb),
               part(n * pw * 4), part1(pw * 4);
  Stream s;
  HcPostParams hp = PostParams(yd.as<float>(), pd.as<float>(), cd.as<float>(), xd.as<float>(), n,
                               hc, D, dw.fn.as<float>(), part.as<float>());
  LaunchHcPost(hp, s.get());
  std::vector<float> gX(X.size()), gp(n * pw), rX(K), rp(pw);
  CopyToHost(gX.data(), xd.get(), gX.size() * 4, s.get());
  CopyToHost(gp.data(), part.get(), gp.size() * 4, s.get());
  s.Synchronize();
  int64_t differ = 0;
  for (const int64_t t : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{31},
                          int64_t{32}, int64_t{317}, n - 2, n - 1}) {
    HcPostParams one = hp;
    one.y = yd.as<float>() + t * D;
    one.post = pd.as<float>() + t * hc;
    one.comb = cd.as<float>() + t * hc * hc;
    one.X = x1.as<float>() + t * K;
    one.n = 1;
    one.mix_part = part1.as<float>();
    LaunchHcPost(one, s.get());
    CopyToHost(rX.data(), one.X, K * 4, s.get());
    CopyToHost(rp.data(), part1.get(), pw * 4, s.get());
    s.Synchronize();
    differ += std::memcmp(rX.data(), gX.data() + t * K, K * 4) != 0;
    differ += std::memcmp(rp.data(), gp.data() + t * pw, pw * 4) != 0;
  }
  EXPECT_EQ(differ, 0) << "rows (streams or mix partials) whose bits differ from the row alone, n "
                       << n;
  // The partials are the defined sums, bit for bit: per block of 64 columns and warp of 32, each
  // lane's fmaf chain over the four new streams (fn[o] . X_new, then X_new . X_new), the warp's
  // butterfly (a += shfl_xor(a, 16, 8, 4, 2, 1)), the two warps added in order.
  int64_t wrong = 0;
  for (const int64_t t : {int64_t{0}, int64_t{17}, n - 1}) {
    for (int64_t b = 0; b < slices; ++b) {
      for (int o = 0; o <= nout; ++o) {
        float warp_sum[2];
        for (int wi = 0; wi < 2; ++wi) {
          float a[32];
          for (int l = 0; l < 32; ++l) {
            const int64_t dcol = 64 * b + 32 * wi + l;
            float v = 0.0f;
            for (int k = 0; k < hc; ++k) {
              const float xk = gX[t * K + k * D + dcol];
              v = std::fma(o < nout ? w.fn[o * K + k * D + dcol] : xk, xk, v);
            }
            a[l] = v;
          }
          for (int off = 16; off > 0; off >>= 1) {
            float na[32];
            for (int l = 0; l < 32; ++l) na[l] = a[l] + a[l ^ off];
            std::copy(na, na + 32, a);
          }
          warp_sum[wi] = a[0];
        }
        const float want = warp_sum[0] + warp_sum[1];
        wrong += std::memcmp(&want, &gp[t * pw + b * (nout + 1) + o], 4) != 0;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "mix partials that are not the defined butterfly sums, n " << n;
}
TEST(HcTest, PostMixManyRowsEqualRowAlone) {
  SKIP_WITHOUT_GPU();
  for (const int64_t n : {kHcPostMixManyRows + 88, kHcPostMixWideRows + 88})
    CheckPostMixManyRows(n);
}

// The grouping of routed pairs by expert, as the serial definition: active experts ascending,
// offsets their prefix counts, each expert's pairs ascending.
struct Grouping {
  std::vector<int32_t> active, offsets, pairs;
  bool operator==(const Grouping&) const = default;
};

Grouping SerialGrouping(const std::vector<int32_t>& sel, int E) {
  Grouping g;
  for (int e = 0; e < E; ++e) {
    const size_t before = g.pairs.size();
    for (size_t i = 0; i < sel.size(); ++i)
      if (sel[i] == e) g.pairs.push_back(static_cast<int32_t>(i));
    if (g.pairs.size() > before) {
      g.active.push_back(e);
      g.offsets.push_back(static_cast<int32_t>(before));
    }
  }
  g.offsets.push_back(static_cast<int32_t>(g.pairs.size()));
  return g;
}

// Device buffers of one grouping and their read-back.
struct DeviceGrouping {
  DeviceBuffer counts, active, num_active, offsets, pairs, done;
  DeviceGrouping(int E, int64_t P)
      : counts(E * 4), active(E * 4), num_active(4), offsets((E + 1) * 4), pairs(P * 4), done(4) {}
  MoeGroupParams Params(const int32_t* sel, int64_t P, int E, Stream& s) {
    Memset(done.get(), 0, 4, s.get());
    MoeGroupParams g;
    g.sel = sel;
    g.pairs = P;
    g.E = E;
    g.counts = counts.as<int32_t>();
    g.active = active.as<int32_t>();
    g.num_active = num_active.as<int32_t>();
    g.offsets = offsets.as<int32_t>();
    g.pair_list = pairs.as<int32_t>();
    g.done = done.as<int32_t>();
    return g;
  }
  Grouping Read(int64_t P, Stream& s) {
    int32_t na = 0;
    CopyToHost(&na, num_active.get(), 4, s.get());
    s.Synchronize();
    Grouping g;
    g.active.resize(na);
    g.offsets.resize(na + 1);
    g.pairs.resize(P);
    CopyToHost(g.active.data(), active.get(), na * 4, s.get());
    CopyToHost(g.offsets.data(), offsets.get(), (na + 1) * 4, s.get());
    CopyToHost(g.pairs.data(), pairs.get(), P * 4, s.get());
    s.Synchronize();
    return g;
  }
};

// Every grouping path (one warp up to 32 pairs, one block up to 2,048, per-expert blocks above)
// against the serial definition, crowded and sparse expert choices included.
TEST(MoeGroupTest, MatchesSerialGrouping) {
  SKIP_WITHOUT_GPU();
  for (const auto& [E, P] : std::vector<std::pair<int, int64_t>>{{256, 1},
                                                                 {256, 6},
                                                                 {8, 32},
                                                                 {256, 33},
                                                                 {256, 48},
                                                                 {16, 300},
                                                                 {256, 2048},
                                                                 {256, 2049},
                                                                 {64, 5000}}) {
    std::vector<int32_t> sel(P);
    uint32_t h = static_cast<uint32_t>(P * 7919 + E);
    for (auto& v : sel) {
      h = h * 1664525u + 1013904223u;
      v = static_cast<int32_t>((h >> 8) % (P > 100 ? 7u : static_cast<uint32_t>(E)));  // crowded
      if ((h & 3u) == 0) v = static_cast<int32_t>((h >> 12) % static_cast<uint32_t>(E));
    }
    DeviceBuffer sd(P * 4);
    CopyToDeviceSync(sd.get(), sel.data(), P * 4);
    Stream s;
    DeviceGrouping dg(E, P);
    LaunchMoeGroup(dg.Params(sd.as<int32_t>(), P, E, s), s.get());
    EXPECT_TRUE(dg.Read(P, s) == SerialGrouping(sel, E)) << "E=" << E << " P=" << P;
  }
}

// The route kernel's own grouping (its last block) equals the separate grouping of its output,
// launch after launch (the block counter resets itself).
TEST(MoeGroupTest, FusedIntoRoute) {
  SKIP_WITHOUT_GPU();
  const int E = 256, K = 6;
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{40}}) {
    auto logits =
        testing::RandomVector(static_cast<size_t>(n * E), 77 + static_cast<uint32_t>(n), 3.0f);
    DeviceBuffer ld(logits.size() * 4), sel(n * K * 4), wt(n * K * 4);
    CopyToDeviceSync(ld.get(), logits.data(), logits.size() * 4);
    Stream s;
    MoeRouteParams rp;
    rp.logits = ld.as<float>();
    rp.n = n;
    rp.E = E;
    rp.K = K;
    rp.scoring = ScoringFunc::kSigmoid;
    rp.sel = sel.as<int32_t>();
    rp.weight = wt.as<float>();
    DeviceGrouping dg(E, n * K);
    const MoeGroupParams gp = dg.Params(sel.as<int32_t>(), n * K, E, s);
    for (int rep = 0; rep < 3; ++rep) {
      Memset(dg.pairs.get(), 0xff, dg.pairs.bytes(), s.get());
      LaunchMoeRoute(rp, &gp, s.get());
      std::vector<int32_t> hsel(n * K);
      CopyToHost(hsel.data(), sel.get(), hsel.size() * 4, s.get());
      const Grouping got = dg.Read(n * K, s);
      EXPECT_TRUE(got == SerialGrouping(hsel, E)) << "n=" << n << " launch " << rep;
    }
  }
}

// The route kernel's experts and weights against the host definition (MoeForward's: top-K of the
// biased score, ties to the lower id; weights normalized over the chosen scores summed in order):
// keys in registers (E <= 256) and in shared memory (E = 512), one token (its warp groups the pairs
// from registers) and several, exact ties included.
TEST(MoeRouteTest, MatchesHostRouting) {
  SKIP_WITHOUT_GPU();
  auto score = [](ScoringFunc f, float x) {
    return f == ScoringFunc::kSigmoid ? 1.0f / (1.0f + std::exp(-x))
                                      : std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));
  };
  for (const ScoringFunc f : {ScoringFunc::kSqrtSoftplus, ScoringFunc::kSigmoid}) {
    for (const auto& [E, K, n] : std::vector<std::tuple<int, int, int64_t>>{
             {256, 6, 1}, {256, 6, 3}, {256, 8, 1}, {512, 6, 1}, {512, 6, 4}, {64, 16, 2}}) {
      auto logits = testing::RandomVector(static_cast<size_t>(n * E), 91 + E + K, 2.0f);
      auto bias = testing::RandomVector(static_cast<size_t>(E), 5 + E, 0.1f);
      // Exact ties among the likely winners: equal keys must go to the lower id.
      for (int64_t t = 0; t < n; ++t) {
        float* lg = logits.data() + t * E;
        lg[3] = lg[E - 1] = lg[40] = 9.0f;
        bias[3] = bias[E - 1] = bias[40] = 0.0f;
      }
      DeviceBuffer ld = Upload(logits), bd = Upload(bias), sel(n * K * 4), wt(n * K * 4);
      Stream s;
      MoeRouteParams rp;
      rp.logits = ld.as<float>();
      rp.bias = bd.as<float>();
      rp.n = n;
      rp.E = E;
      rp.K = K;
      rp.scoring = f;
      rp.routed_scaling_factor = 1.5f;
      rp.sel = sel.as<int32_t>();
      rp.weight = wt.as<float>();
      DeviceGrouping dg(E, n * K);
      const MoeGroupParams gp = dg.Params(sel.as<int32_t>(), n * K, E, s);
      LaunchMoeRoute(rp, &gp, s.get());
      std::vector<int32_t> hsel(n * K);
      std::vector<float> hwt(n * K);
      CopyToHost(hsel.data(), sel.get(), hsel.size() * 4, s.get());
      CopyToHost(hwt.data(), wt.get(), hwt.size() * 4, s.get());
      const Grouping got = dg.Read(n * K, s);
      EXPECT_TRUE(got == SerialGrouping(hsel, E)) << "E=" << E << " n=" << n;
      for (int64_t t = 0; t < n; ++t) {
        std::vector<float> sc(E), key(E);
        std::vector<int32_t> order(E);
        for (int e = 0; e < E; ++e) {
          sc[e] = score(f, logits[t * E + e]);
          key[e] = sc[e] + bias[e];
        }
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
          return key[a] != key[b] ? key[a] > key[b] : a < b;
        });
        float sum = 0;
        for (int k = 0; k < K; ++k) sum += sc[order[k]];
        for (int k = 0; k < K; ++k) {
          ASSERT_EQ(hsel[t * K + k], order[k])
              << "E=" << E << " K=" << K << " t=" << t << " k=" << k;
          EXPECT_NEAR(hwt[t * K + k], sc[order[k]] / (sum + 1e-20f) * 1.5f, 1e-5f);
        }
      }
    }
  }
}

// The sampling kernel's plain greedy mode (no per-row draws: the decode step of `dsinfer bench`),
// over vocabularies of every residue; ties go to the lower id. Its full sampling is checked
// against the CPU sampler in gpu_sampler_test.
TEST(SampleTest, GreedyRows) {
  SKIP_WITHOUT_GPU();
  for (const int64_t V : {int64_t{5000}, int64_t{4999}, int64_t{129280}}) {
    const int64_t rows = 3;
    auto lg = testing::RandomVector(rows * V, 9);
    lg[1 * V + 4321] = 100.0f;
    lg[2 * V + 4000] = lg[2 * V + V - 3] = 50.0f;  // a tie: the lower id wins
    DeviceBuffer ld(lg.size() * 4), od(rows * 4);
    CopyToDeviceSync(ld.get(), lg.data(), lg.size() * 4);
    Stream s;
    SampleRowsParams p;
    p.logits = ld.as<float>();
    p.num_rows = rows;
    p.vocab = V;
    p.out_id = od.as<int32_t>();
    LaunchSampleRows(p, s.get());
    std::vector<int32_t> got(rows);
    CopyToHost(got.data(), od.get(), rows * 4, s.get());
    s.Synchronize();
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], std::max_element(lg.begin() + r * V, lg.begin() + (r + 1) * V) -
                            (lg.begin() + r * V))
          << "V=" << V << " row " << r;
    }
    EXPECT_EQ(got[1], 4321) << "V=" << V;
    EXPECT_EQ(got[2], 4000) << "V=" << V;
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda
