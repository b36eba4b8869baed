// DeepSeek-V4.1 DSpark's device ops against the CPU reference's arithmetic
// (model/deepseek_v41/dspark.cc, model.cc): the taps' stream mean bit for bit; the block attention
// (context rows + the whole block, the sink, the inverse RoPE) against backend/cpu's AttendHead and
// RopeRows within 1e-5; the Markov step (term, greedy id, confidence) within 1e-5 and the same ids.
// Every request's results must not depend on the other requests in the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "backend/cuda/dspark.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"

namespace dsinfer::backend::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double MaxRelative(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, top = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double{a[i]} - b[i]));
    top = std::max(top, std::abs(double{b[i]}));
  }
  return err / std::max(top, 1e-30);
}

TEST(DSparkOpsTest, StreamMeanIsTheCpusBits) {
  SKIP_WITHOUT_GPU();
  for (int hc : {3, 4}) {
    const int64_t n = 5, D = 300, ld = 2 * D;
    const auto x = Random(static_cast<size_t>(n * hc * D), 1 + hc);
    DeviceBuffer dx = Upload(x), dout(static_cast<size_t>(n * ld) * sizeof(float));
    Stream stream;
    StreamMeanParams p;
    p.x = static_cast<const float*>(dx.get());
    p.n = n;
    p.hc = hc;
    p.dim = D;
    p.out = static_cast<float*>(dout.get()) + D;  // the second tap of each row
    p.ld = ld;
    LaunchStreamMean(p, stream.get());
    const auto got = Download<float>(dout, static_cast<size_t>(n * ld), stream);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k < D; ++k) {
        float sum = 0.0f;
        for (int h = 0; h < hc; ++h) sum += x[(t * hc + h) * D + k];
        ASSERT_EQ(FloatToBits(got[t * ld + D + k]), FloatToBits(sum / static_cast<float>(hc)))
            << "hc " << hc << " row " << t << " channel " << k;
      }
    }
  }
}

// R requests of B block slots, H heads of dim d (rope trailing dims), each request's context rows
// (ctx_len[r] of at most W): random inputs on host and device, positions pos[t], and the params of
// the attention over them (q and out left to the test).
struct BlockAttentionCase {
  int R, B, H, d, rope, W;
  int64_t n;
  std::vector<int32_t> ctx_len, pos;
  std::vector<int64_t> pos64;
  std::vector<float> q, block, ctx, sink, inv;
  DeviceBuffer dq, db, dc, dl, ds, di, dp;

  BlockAttentionCase(int R_, int B_, int H_, int d_, int rope_, int W_, std::vector<int32_t> lens,
                     uint32_t seed, std::vector<int32_t> positions)
      : R(R_),
        B(B_),
        H(H_),
        d(d_),
        rope(rope_),
        W(W_),
        n(int64_t{R_} * B_),
        ctx_len(std::move(lens)),
        pos(std::move(positions)) {
    q = Random(static_cast<size_t>(n * H * d), seed);
    block = Random(static_cast<size_t>(n * d), seed + 1);
    ctx = Random(static_cast<size_t>(R * W * d), seed + 2);
    sink = Random(H, seed + 3);
    inv.resize(rope / 2);
    for (int i = 0; i < rope / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rope);
    pos64.assign(pos.begin(), pos.end());
    dq = Upload(q);
    db = Upload(block);
    dc = Upload(ctx);
    dl = Upload(ctx_len);
    ds = Upload(sink);
    di = Upload(inv);
    dp = Upload(pos);
  }
  DSparkAttentionParams Params() const {
    DSparkAttentionParams p;
    p.q = static_cast<const float*>(dq.get());
    p.block = static_cast<const float*>(db.get());
    p.ctx = static_cast<const float*>(dc.get());
    p.ctx_len = static_cast<const int32_t*>(dl.get());
    p.ctx_stride = W;
    p.requests = R;
    p.block_size = B;
    p.heads = H;
    p.dim = d;
    p.sink = static_cast<const float*>(ds.get());
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    p.rope_dim = rope;
    p.inv_freq = static_cast<const float*>(di.get());
    p.positions = static_cast<const int32_t*>(dp.get());
    return p;
  }
};

TEST(DSparkOpsTest, BlockAttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const int R = 3, B = 5, H = 4, d = 64, W = 8;
  const std::vector<int32_t> ctx_len = {8, 3, 1};  // a full window, a short one, a single row
  std::vector<int32_t> pos;
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < B; ++k) pos.push_back(100 * r + ctx_len[r] + k);
  const BlockAttentionCase c(R, B, H, d, 16, W, ctx_len, 11, pos);
  const int64_t n = c.n;
  DeviceBuffer dout(static_cast<size_t>(n * H * d) * sizeof(float));
  Stream stream;
  DSparkAttentionParams p = c.Params();
  p.out = static_cast<float*>(dout.get());
  LaunchDSparkAttention(p, stream.get());
  const auto got = Download<float>(dout, static_cast<size_t>(n * H * d), stream);

  std::vector<float> want(static_cast<size_t>(n * H * d)), logits(W + B);
  for (int r = 0; r < R; ++r) {
    std::vector<const float*> keys;
    for (int j = 0; j < ctx_len[r]; ++j) keys.push_back(c.ctx.data() + (r * W + j) * d);
    for (int k = 0; k < B; ++k) keys.push_back(c.block.data() + (r * B + k) * d);
    for (int k = 0; k < B; ++k) {
      for (int h = 0; h < H; ++h) {
        const int64_t t = r * B + k;
        cpu::AttendHead(c.q.data() + (t * H + h) * d, keys, d, p.scale, c.sink[h], logits.data(),
                        want.data() + (t * H + h) * d);
      }
    }
  }
  cpu::RopeRows(want.data(), n, H, d, c.rope, c.inv, c.pos64.data(), /*inverse=*/true);
  EXPECT_LE(MaxRelative(got, want), 1e-5);

  // A request alone gives the same bits.
  DSparkAttentionParams one = p;
  one.requests = 1;
  one.q += B * H * d;
  one.block += B * d;
  one.ctx += W * d;
  one.ctx_len += 1;
  one.positions += B;
  DeviceBuffer dout1(static_cast<size_t>(B * H * d) * sizeof(float));
  one.out = static_cast<float*>(dout1.get());
  LaunchDSparkAttention(one, stream.get());
  const auto alone = Download<float>(dout1, static_cast<size_t>(B * H * d), stream);
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), got.begin() + B * H * d));
}

// q_rope: the query's RoPE applied by the kernel equals the CPU's RopeRows before it.
TEST(DSparkOpsTest, BlockAttentionAppliesTheQueryRope) {
  SKIP_WITHOUT_GPU();
  const int R = 2, B = 3, H = 2, d = 64;
  std::vector<int32_t> pos;
  for (int t = 0; t < R * B; ++t) pos.push_back(37 * t + 5);
  const BlockAttentionCase c(R, B, H, d, 16, 4, {4, 2}, 31, pos);
  const int64_t n = c.n;
  std::vector<float> q_roped = c.q;
  cpu::RopeRows(q_roped.data(), n, H, d, c.rope, c.inv, c.pos64.data(), /*inverse=*/false);
  DeviceBuffer dqr = Upload(q_roped), d1(static_cast<size_t>(n * H * d) * sizeof(float)),
               d2(static_cast<size_t>(n * H * d) * sizeof(float));
  Stream stream;
  DSparkAttentionParams p = c.Params();
  p.q = static_cast<const float*>(dqr.get());
  p.out = static_cast<float*>(d1.get());
  LaunchDSparkAttention(p, stream.get());
  p.q = static_cast<const float*>(c.dq.get());
  p.q_rope = true;
  p.out = static_cast<float*>(d2.get());
  LaunchDSparkAttention(p, stream.get());
  const auto want = Download<float>(d1, static_cast<size_t>(n * H * d), stream);
  const auto got = Download<float>(d2, static_cast<size_t>(n * H * d), stream);
  EXPECT_LE(MaxRelative(got, want), 1e-5);
}

// The context gather: each request's rows max(0, L - W) .. L - 1 of its ring, by position.
TEST(DSparkOpsTest, GatherContextReadsTheLastWindowOfTheRing) {
  SKIP_WITHOUT_GPU();
  const int64_t W = 4, cap = W + 2, dim = 8, slots = 3;
  const auto pool = Random(static_cast<size_t>(slots * cap * dim), 41);
  const std::vector<int32_t> pages = {2, 0, 1};  // table row r -> its page
  // Two requests (stride 2 in the metadata): table rows 0 and 2, lengths 3 and 23.
  const std::vector<int32_t> slot = {0, -1, 2, -1}, start = {3, -1, 23, -1};
  DeviceBuffer dpool = Upload(pool), dpages = Upload(pages), dslot = Upload(slot),
               dstart = Upload(start), dout(static_cast<size_t>(2 * W * dim) * sizeof(float)),
               dlen(2 * sizeof(int32_t));
  Stream stream;
  DSparkGatherParams p;
  p.ring.pool = static_cast<float*>(dpool.get());
  p.ring.cap = cap;
  p.ring.width = dim;
  p.ring.page_floats = cap * dim;
  p.ring.pages = static_cast<const int32_t*>(dpages.get());
  p.ring.pages_stride = 1;
  p.slot = static_cast<const int32_t*>(dslot.get());
  p.start = static_cast<const int32_t*>(dstart.get());
  p.stride = 2;
  p.requests = 2;
  p.window = W;
  p.dim = dim;
  p.out = static_cast<float*>(dout.get());
  p.len = static_cast<int32_t*>(dlen.get());
  LaunchDSparkGatherContext(p, stream.get());
  const auto got = Download<float>(dout, static_cast<size_t>(2 * W * dim), stream);
  const auto len = Download<int32_t>(dlen, 2, stream);
  for (int r = 0; r < 2; ++r) {
    const int64_t L = start[2 * r], first = std::max<int64_t>(0, L - W);
    ASSERT_EQ(len[r], L - first);
    const int64_t page = pages[slot[2 * r]];
    for (int64_t j = 0; j < L - first; ++j) {
      for (int64_t i = 0; i < dim; ++i) {
        EXPECT_EQ(got[(r * W + j) * dim + i], pool[(page * cap + (first + j) % cap) * dim + i])
            << "request " << r << " row " << j;
      }
    }
  }
}

// The head's collapse: sum_i pre_i X_i in stream order.
TEST(DSparkOpsTest, CollapseMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 3, hc = 4, D = 300;
  const auto x = Random(static_cast<size_t>(n * hc * D), 51);
  const auto pre = Random(static_cast<size_t>(n * hc), 52);
  DeviceBuffer dx = Upload(x), dpre = Upload(pre), dout(static_cast<size_t>(n * D) * 4);
  Stream stream;
  DSparkCollapseParams p;
  p.x = static_cast<const float*>(dx.get());
  p.pre = static_cast<const float*>(dpre.get());
  p.n = n;
  p.hc = static_cast<int>(hc);
  p.dim = D;
  p.out = static_cast<float*>(dout.get());
  LaunchDSparkCollapse(p, stream.get());
  const auto got = Download<float>(dout, static_cast<size_t>(n * D), stream);
  std::vector<float> want(static_cast<size_t>(n * D));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < D; ++k) {
      double s = 0;
      for (int64_t i = 0; i < hc; ++i) s += double{pre[t * hc + i]} * x[(t * hc + i) * D + k];
      want[t * D + k] = static_cast<float>(s);
    }
  }
  EXPECT_LE(MaxRelative(got, want), 1e-6);
}

TEST(DSparkOpsTest, MarkovStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int R, r;
    int64_t V;
  };
  // Requests within one group of the bias kernel and over two (a partial last group); a rank of
  // 8-value loads and one of single loads; a vocab of whole tiles and a partial last tile.
  for (const Shape& sh : {Shape{3, 16, 1000}, Shape{11, 20, 2500}, Shape{17, 64, 512}})
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("R " + std::to_string(sh.R) + " rank " + std::to_string(sh.r) + " vocab " +
                   std::to_string(sh.V));
      const int R = sh.R, r = sh.r;
      const int64_t V = sh.V, D = 64, ld = V + 7;
      auto embed = Random(static_cast<size_t>(V * r), 21, 1.0f);
      auto head = Random(static_cast<size_t>(V * r), 22, 0.5f);
      if (bf16) {  // values the bf16 storage holds exactly
        for (float& v : embed) v = Bf16ToFloat(FloatToBf16(v));
        for (float& v : head) v = Bf16ToFloat(FloatToBf16(v));
      }
      auto to_bf16 = [](const std::vector<float>& v) {
        std::vector<uint16_t> b(v.size());
        for (size_t i = 0; i < v.size(); ++i) b[i] = FloatToBf16(v[i]);
        return b;
      };
      const auto logits = Random(static_cast<size_t>(R * ld), 23, 2.0f);
      const auto xh = Random(static_cast<size_t>(R * D), 24);
      const auto w = Random(static_cast<size_t>(D + r), 25, 0.1f);
      std::vector<int32_t> prev(static_cast<size_t>(R));
      for (int q = 0; q < R; ++q) prev[q] = static_cast<int32_t>((q * 997 + 5) % V);
      prev[R - 1] = static_cast<int32_t>(V - 1);
      DeviceBuffer de = bf16 ? Upload(to_bf16(embed)) : Upload(embed);
      DeviceBuffer dh = bf16 ? Upload(to_bf16(head)) : Upload(head);
      DeviceBuffer dl = Upload(logits), dx = Upload(xh), dw = Upload(w), dp = Upload(prev),
                   dc(R * sizeof(float)), di(R * sizeof(int32_t)),
                   dbv(R * MarkovStepTiles(V) * sizeof(float)),
                   dbi(R * MarkovStepTiles(V) * sizeof(int32_t));
      Stream stream;
      MarkovStepParams p;
      p.logits = static_cast<float*>(dl.get());
      p.ld_logits = ld;
      p.requests = R;
      p.vocab = V;
      p.rank = r;
      p.embed = de.get();
      p.head = dh.get();
      p.bf16 = bf16;
      p.prev = static_cast<int32_t*>(dp.get());
      p.xh = static_cast<const float*>(dx.get());
      p.ld_xh = D;
      p.hidden = D;
      p.confidence_w = static_cast<const float*>(dw.get());
      p.confidence = static_cast<float*>(dc.get());
      p.ids = static_cast<int32_t*>(di.get());
      p.best_v = static_cast<float*>(dbv.get());
      p.best_i = static_cast<int32_t*>(dbi.get());
      LaunchMarkovStep(p, stream.get());
      const auto got_logits = Download<float>(dl, static_cast<size_t>(R * ld), stream);
      const auto got_conf = Download<float>(dc, R, stream);
      const auto got_ids = Download<int32_t>(di, R, stream);
      const auto got_prev = Download<int32_t>(dp, R, stream);
      for (int q = 0; q < R; ++q) {
        std::vector<float> row(logits.begin() + q * ld, logits.begin() + q * ld + V);
        for (int64_t v = 0; v < V; ++v) {
          double bias = 0;
          for (int j = 0; j < r; ++j) bias += double{head[v * r + j]} * embed[prev[q] * r + j];
          row[v] += static_cast<float>(bias);
        }
        const std::vector<float> got_row(got_logits.begin() + q * ld,
                                         got_logits.begin() + q * ld + V);
        EXPECT_LE(MaxRelative(got_row, row), 1e-5) << "bf16 " << bf16 << " request " << q;
        const int32_t want =
            static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        EXPECT_EQ(got_ids[q], want) << "request " << q;
        // The pick is the first maximum of the row the kernel wrote (ties to the smallest id).
        EXPECT_EQ(got_ids[q], std::max_element(got_row.begin(), got_row.end()) - got_row.begin());
        EXPECT_EQ(got_prev[q], want);
        double conf = 0;
        for (int64_t k = 0; k < D; ++k) conf += double{w[k]} * xh[q * D + k];
        for (int j = 0; j < r; ++j) conf += double{w[D + j]} * embed[prev[q] * r + j];
        EXPECT_NEAR(got_conf[q], conf, 1e-5 * std::max(1.0, std::abs(conf)));
        // The other logits rows' padding is untouched.
        for (int64_t v = V; v < ld; ++v) EXPECT_EQ(got_logits[q * ld + v], logits[q * ld + v]);
      }
    }
}

}  // namespace
}  // namespace dsinfer::backend::cuda
