// DeepSeek-V4.1's device ops against the CPU reference (model/deepseek_v41), second part: the
// indexer's FP4 query and two-level selection (IndexScores, SelectCandidateBlocks, SelectTopK),
// with DeepSeek-V4's FP8 cache's packed keys and tensor-core scores, and the Engram hash (exact),
// gather (exact) and gate (1e-6). gpu_v41_ops_test.cc has the quantizers, the compressor and the
// index keys; both share gpu_v41_fixtures.h. Every op also runs row by row against batched chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/compressor.cuh"
#include "backend/cuda/engram.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "gpu_v41_fixtures.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/indexer.h"
#include "model/quant_sim.h"
#include "test_util.h"

namespace dsinfer::backend::cuda::v41_test {
namespace {

namespace v41 = model::deepseek_v41;

// ================================ indexer ================================

struct IdxCase {
  int rate, heads, head_dim, rope_dim, topk, block_size, topk_blocks;
};

struct IdxRun {
  std::vector<int32_t> sel, count;
  std::vector<uint8_t> cand;
  std::vector<float> scores;  // [n, max_entries] (NaN where not computed)
};

// DeepSeek-V4's FP8 cache in place of V4.1's FP4 query and candidate blocks: its queries already
// rounded (the scoring applies no RoPE and no rounding), per-block dots (fp4_blocks), on the
// tensor cores from one row when `tc`.
struct V4Fp8Mode {
  bool fp4_blocks = true;
  bool tc = false;
  bool runs = false;  // with tc: several rows a block, a slot's keys decoded once (from one row)
};

// One indexer launch over `m`'s rows. mode 0: candidate source (out); 1: masked by `cand_in`;
// 2: both, in and out the same array (initialized from cand_in); with `v4` no candidates.
IdxRun RunIndexer(const IdxCase& ic, const Meta& m, const std::vector<float>& q,
                  const std::vector<float>& w, const ListPool& keys, int max_entries, int mode,
                  const std::vector<uint8_t>& cand_in, int64_t score_rows, const Stream& stream,
                  const qc::PackedRow& key_format = {}, const V4Fp8Mode* v4 = nullptr) {
  const int64_t n = m.n();
  const int stride = v4 ? 0 : (max_entries + ic.block_size - 1) / ic.block_size + 3;
  DeviceBuffer d_q = Upload(q), d_w = Upload(w), d_freq = Upload(InvFreq(ic.rope_dim));
  DeviceBuffer d_sel = Upload(std::vector<int32_t>(static_cast<size_t>(n) * ic.topk, -7));
  DeviceBuffer d_count = Upload(std::vector<int32_t>(static_cast<size_t>(n), -7));
  std::vector<uint8_t> c0 =
      mode == 0 ? std::vector<uint8_t>(static_cast<size_t>(n) * stride, 9) : cand_in;
  DeviceBuffer d_cand = v4 ? DeviceBuffer() : Upload(c0);
  const int64_t score_n = std::min(score_rows, n);
  DeviceBuffer d_scores =
      Upload(std::vector<float>(static_cast<size_t>(score_n) * max_entries, NAN));
  IndexerTopKParams p;
  p.meta = m.meta;
  p.q = d_q.as<float>();
  p.weights = d_w.as<float>();
  p.weight_scale = 1.0f / std::sqrt(static_cast<float>(ic.heads));
  p.rope_dim = ic.rope_dim;
  p.inv_freq = d_freq.as<float>();
  p.keys = keys.ref;
  p.key_format = key_format;
  p.heads = ic.heads;
  p.head_dim = ic.head_dim;
  p.rate = ic.rate;
  p.topk = ic.topk;
  p.max_entries = max_entries;
  p.sel = d_sel.as<int32_t>();
  p.sel_count = d_count.as<int32_t>();
  p.scores = d_scores.as<float>();
  p.score_rows = score_rows;
  if (v4 != nullptr) {
    p.rope_dim = 0;
    p.fp4_blocks = v4->fp4_blocks;
    p.tensor_core_min_rows = v4->tc ? 1 : 0;
    p.tc_runs_min_rows = v4->runs ? 1 : 0;
    EXPECT_EQ(IndexerTensorCoresFit(p), v4->fp4_blocks);
  } else {
    p.query_fp4_block = 32;
    p.candidate_block_size = ic.block_size;
    p.candidate_stride = stride;
    p.candidate_topk_blocks = ic.topk_blocks;
    if (mode != 1) p.candidates_out = d_cand.as<uint8_t>();
    if (mode != 0) p.candidates_in = d_cand.as<uint8_t>();
  }
  PrepareIndexerTopK(ic.heads, ic.head_dim, max_entries);
  LaunchIndexerTopK(p, stream.get());
  IdxRun r;
  r.sel = Download<int32_t>(d_sel, static_cast<size_t>(n) * ic.topk, stream);
  r.count = Download<int32_t>(d_count, static_cast<size_t>(n), stream);
  if (v4 == nullptr) r.cand = Download<uint8_t>(d_cand, static_cast<size_t>(n) * stride, stream);
  if (score_rows >= n)
    r.scores = Download<float>(d_scores, static_cast<size_t>(n) * max_entries, stream);
  return r;
}

// DeepSeek-V4's FP8 cache: index keys read packed (key_format: e2m1 nibbles + scale bytes, rows
// only 4-byte aligned) give the scores and the selection of the same values read as fp32 rows.
TEST(V4Fp8CacheTest, PackedIndexKeysGiveTheUnpackedScoresAndSelection) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  for (const IdxCase& ic : {IdxCase{2, 8, 64, 16, 12, 4, 5}, IdxCase{4, 64, 128, 64, 20, 8, 4}}) {
    const int max_entries = 160, seqs = 2;
    const model::KvFormat f(model::KvQuant::kFp4Pow2, ic.head_dim, 32);
    ASSERT_TRUE(f.packed());
    const int width = static_cast<int>(f.row_floats());
    std::vector<std::vector<float>> rows(seqs), packed(seqs);
    for (int s = 0; s < seqs; ++s) {
      rows[s] = testing::RandomVector(static_cast<size_t>(max_entries) * ic.head_dim, 900 + s);
      packed[s].assign(static_cast<size_t>(max_entries) * width, 0.0f);
      for (int e = 0; e < max_entries; ++e)  // rounds the row in place, and packs it
        f.Pack(rows[s].data() + e * ic.head_dim, packed[s].data() + e * width);
    }
    ListPool plain(seqs, max_entries, ic.head_dim), pk(seqs, max_entries, width);
    plain.Set(rows);
    pk.Set(packed);
    auto m = MakeMeta({{0, ic.rate * 150, 6}, {1, 0, 9}, {0, ic.rate * 30, 1}});
    const int64_t n = m->n();
    const std::vector<float> q =
        testing::RandomVector(static_cast<size_t>(n) * ic.heads * ic.head_dim, 910);
    const std::vector<float> w = testing::RandomVector(static_cast<size_t>(n) * ic.heads, 911);
    for (int64_t score_rows : {n, int64_t{1}}) {
      const IdxRun a = RunIndexer(ic, *m, q, w, plain, max_entries, 0, {}, score_rows, stream);
      const IdxRun b =
          RunIndexer(ic, *m, q, w, pk, max_entries, 0, {}, score_rows, stream, f.codec());
      EXPECT_EQ(a.sel, b.sel) << ic.head_dim;
      EXPECT_EQ(a.count, b.count) << ic.head_dim;
      EXPECT_EQ(a.cand, b.cand) << ic.head_dim;
      ASSERT_EQ(a.scores.size(), b.scores.size());
      EXPECT_EQ(std::memcmp(a.scores.data(), b.scores.data(), a.scores.size() * 4), 0)
          << ic.head_dim;
    }
  }
}

// DeepSeek-V4's FP8 cache indexer over packed FP4 keys (`tc`: the tensor-core scores).
IdxRun RunV4Fp8Indexer(const IdxCase& ic, const Meta& m, const std::vector<float>& q,
                       const std::vector<float>& w, const ListPool& keys, int max_entries,
                       int64_t score_rows, bool fp4_blocks, bool tc,
                       const qc::PackedRow& key_format, const Stream& stream, bool runs = false) {
  const V4Fp8Mode v4{fp4_blocks, tc, runs};
  return RunIndexer(ic, m, q, w, keys, max_entries, 1, {}, score_rows, stream, key_format, &v4);
}

// Values whose 32-column blocks span magnitudes 1e-3 .. 1e2 (blocks take different scales).
std::vector<float> SpreadValues(size_t n, uint32_t seed) {
  std::vector<float> x = testing::RandomVector(n, seed);
  for (size_t i = 0; i < n; ++i) x[i] *= std::pow(10.0f, static_cast<float>((i / 32) % 6) - 3);
  return x;
}

// The index keys' table decode (head_dim 128: a code byte's two e2m1 values as a bf16 pair times
// the block's scale as a bf16 pair, for scale bytes 2..252) over every (code byte, scale byte)
// pair of that range: 251 scale bytes x 16 blocks of 16 code bytes, packed directly (not rounded
// from floats), 1,004 key rows. One head, and per column c two rows whose query is +1 or -1 at c
// and 0 elsewhere, so that each score is relu(+-key[c]) * scale: every decoded value shows in
// some score. The scores of both tensor-core kernels and of the CUDA cores equal the CPU's over
// the unpacked rows, bit for bit.
TEST(V4Fp8CacheTest, IndexKeysDecodeEveryCodeAndScaleByte) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  constexpr int kDim = 128, kLo = qc::kE2m1PairExactLo, kHi = qc::kE2m1PairExactHi;
  const int blocks = (kHi - kLo + 1) * 16, entries = blocks / 4;
  const IdxCase ic{4, 1, kDim, 0, 8, 0, 0};
  const model::KvFormat f(model::KvQuant::kFp4Pow2, kDim, 32);
  const int width = static_cast<int>(f.row_floats());
  std::vector<std::vector<float>> packed(1), rows(1);
  packed[0].assign(static_cast<size_t>(entries) * width, 0.0f);
  rows[0].assign(static_cast<size_t>(entries) * kDim, 0.0f);
  for (int e = 0; e < entries; ++e) {
    auto* bytes = reinterpret_cast<uint8_t*>(packed[0].data() + e * width);
    for (int bk = 0; bk < 4; ++bk) {
      const int gb = 4 * e + bk;  // block gb: scale byte kLo + gb / 16, code bytes 16 (gb % 16) ..
      bytes[kDim / 2 + bk] = static_cast<uint8_t>(kLo + gb / 16);
      for (int i = 0; i < 16; ++i) bytes[16 * bk + i] = static_cast<uint8_t>(16 * (gb % 16) + i);
    }
    f.Unpack(packed[0].data() + e * width, rows[0].data() + e * kDim);
  }
  ListPool pk(1, entries, width);
  pk.Set(packed);
  std::vector<Seg> segs(2 * kDim, Seg{0, ic.rate * entries - 1, 1});
  auto m = MakeMeta(segs);
  const int64_t n = m->n();
  std::vector<float> q(static_cast<size_t>(n) * kDim, 0.0f), w(static_cast<size_t>(n), 1.0f);
  for (int64_t t = 0; t < n; ++t) q[t * kDim + t / 2] = t % 2 == 0 ? 1.0f : -1.0f;
  const qc::PackedRow fmt = f.codec();
  std::vector<const float*> keys;
  for (int e = 0; e < entries; ++e) keys.push_back(rows[0].data() + e * kDim);
  int nonzero = 0;
  for (const int path : {0, 1, 2}) {  // the CUDA cores, one row a block, runs of rows
    const IdxRun r =
        RunV4Fp8Indexer(ic, *m, q, w, pk, entries, n, true, path > 0, fmt, stream, path == 2);
    ASSERT_EQ(r.scores.size(), static_cast<size_t>(n) * entries);
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> cpu = model::deepseek_v4::IndexerScores(
          q.data() + t * kDim, w.data() + t, 1, kDim, keys, entries, true);
      for (int e = 0; e < entries; ++e) {
        const float g = r.scores[t * entries + e];
        ASSERT_TRUE(SameBits(g, cpu[e]))
            << "path " << path << " column " << t / 2 << " sign " << t % 2 << " entry " << e << ": "
            << g << " vs " << cpu[e];
        nonzero += path == 1 && cpu[e] != 0.0f;
      }
    }
  }
  // Each column's nonzero values show once (in one of its two rows): 7 of 8 codes of a nibble.
  EXPECT_GT(nonzero, entries * kDim / 2);
}

// The FP8 cache's indexer scores on the tensor cores (tensor_core_min_rows) have the CUDA cores'
// bits and the CPU's (IndexerScores / IndexerTopK with fp4_blocks): each 32-column block's sum is
// exact for FP4 values. Many tokens (4 passes of 64 entries a block) and one at a time (1 pass);
// head counts below 64 and head_dim 32 .. 128. Negative control: one fmaf chain over head_dim (no
// fp4_blocks) gives other scores.
TEST(V4Fp8CacheTest, TensorCoreIndexerScoresAsTheCudaCoresAndTheCpu) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  for (const IdxCase& ic : {IdxCase{4, 64, 128, 0, 24, 0, 0}, IdxCase{4, 5, 32, 0, 9, 0, 0},
                            IdxCase{2, 24, 96, 0, 40, 0, 0}}) {
    const int max_entries = 700, seqs = 2;
    const model::KvFormat f(model::KvQuant::kFp4Pow2, ic.head_dim, 32);
    const int width = static_cast<int>(f.row_floats());
    std::vector<std::vector<float>> rows(seqs), packed(seqs);
    for (int s = 0; s < seqs; ++s) {
      rows[s] = SpreadValues(static_cast<size_t>(max_entries) * ic.head_dim, 930 + s);
      // Scale bytes far from 127 (head_dim 128 decodes by a table over bytes 2..252, others as
      // PackedLoad4 does): a block of zeros (byte 1), blocks scaled by 2^-60 and 2^60.
      for (int e = 0; e < max_entries && ic.head_dim == 128; ++e) {
        float* const blk = rows[s].data() + e * ic.head_dim + 32 * (1 + e % 3);
        const float f2 =
            e % 5 == 1 ? 0.0f : (e % 5 == 2 ? 0x1p-60f : (e % 5 == 3 ? 0x1p60f : 1.0f));
        for (int i = 0; i < 32; ++i) blk[i] *= f2;
      }
      packed[s].assign(static_cast<size_t>(max_entries) * width, 0.0f);
      for (int e = 0; e < max_entries; ++e)  // rounds the row in place, and packs it
        f.Pack(rows[s].data() + e * ic.head_dim, packed[s].data() + e * width);
    }
    ListPool pk(seqs, max_entries, width);
    pk.Set(packed);
    // Rows near the end of the context (several 256-entry blocks, a partial pass), short ones
    // (every entry selected: no scores), a middle one.
    auto m = MakeMeta({{0, ic.rate * max_entries - 7, 6}, {1, 0, 9}, {1, ic.rate * 300, 2}});
    const int64_t n = m->n();
    const int H = ic.heads, Dh = ic.head_dim;
    std::vector<float> q = SpreadValues(static_cast<size_t>(n) * H * Dh, 940);
    for (int64_t r = 0; r < n * H; ++r) model::Fp4BlockSim(q.data() + r * Dh, Dh, 32, false);
    const std::vector<float> w = testing::RandomVector(static_cast<size_t>(n) * H, 941);
    const qc::PackedRow fmt = f.codec();
    const IdxRun cuda = RunV4Fp8Indexer(ic, *m, q, w, pk, max_entries, n, true, false, fmt, stream);
    const IdxRun tc = RunV4Fp8Indexer(ic, *m, q, w, pk, max_entries, n, true, true, fmt, stream);
    const IdxRun tc1 = RunV4Fp8Indexer(ic, *m, q, w, pk, max_entries, 1, true, true, fmt, stream);
    // Several rows a block (16), each run of one slot's rows decoding its keys once: a block of
    // two slots' runs, of scored and unscored rows, and a last partial block of one row.
    const IdxRun runs =
        RunV4Fp8Indexer(ic, *m, q, w, pk, max_entries, n, true, true, fmt, stream, true);
    const IdxRun chain =
        RunV4Fp8Indexer(ic, *m, q, w, pk, max_entries, n, false, false, fmt, stream);
    ASSERT_EQ(cuda.scores.size(), tc.scores.size());
    EXPECT_EQ(std::memcmp(cuda.scores.data(), tc.scores.data(), cuda.scores.size() * 4), 0) << Dh;
    EXPECT_EQ(cuda.sel, tc.sel) << Dh;
    EXPECT_EQ(cuda.count, tc.count) << Dh;
    EXPECT_EQ(tc1.sel, tc.sel) << Dh;
    EXPECT_EQ(tc1.count, tc.count) << Dh;
    ASSERT_EQ(runs.scores.size(), tc.scores.size());
    EXPECT_EQ(std::memcmp(runs.scores.data(), tc.scores.data(), tc.scores.size() * 4), 0) << Dh;
    EXPECT_EQ(runs.sel, tc.sel) << Dh;
    EXPECT_EQ(runs.count, tc.count) << Dh;
    const float head_scale = 1.0f / std::sqrt(static_cast<float>(H));
    int compared = 0, chain_differs = 0;
    for (int64_t t = 0; t < n; ++t) {
      const int visible = (m->pos[t] + 1) / ic.rate;
      std::vector<const float*> keys;
      for (int e = 0; e < visible; ++e) keys.push_back(rows[m->slot[t]].data() + e * Dh);
      std::vector<float> wt(w.begin() + t * H, w.begin() + (t + 1) * H);
      for (float& v : wt) v *= head_scale;
      const float* qt = q.data() + t * H * Dh;
      const std::vector<int32_t> want =
          model::deepseek_v4::IndexerTopK(qt, wt.data(), H, Dh, keys, visible, ic.topk, true);
      ASSERT_EQ(tc.count[t], static_cast<int32_t>(want.size())) << Dh << " row " << t;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), tc.sel.begin() + t * ic.topk))
          << Dh << " row " << t;
      if (static_cast<int>(want.size()) == visible) continue;  // (not scored)
      const std::vector<float> cpu =
          model::deepseek_v4::IndexerScores(qt, wt.data(), H, Dh, keys, visible, true);
      for (int e = 0; e < visible; ++e) {
        const float g = tc.scores[t * max_entries + e];
        ASSERT_TRUE(SameBits(g, cpu[e]))
            << Dh << " row " << t << " entry " << e << ": " << g << " vs " << cpu[e];
        chain_differs += !SameBits(chain.scores[t * max_entries + e], g);
        ++compared;
      }
    }
    EXPECT_GT(compared, 1000) << Dh;
    // (Where the blocks span few binades the one chain is exact too: checked at head_dim 128.)
    if (Dh == 128) {
      EXPECT_GT(chain_differs, 0) << Dh;
    }
    // A few tokens in one chunk (decode's launches: the CUDA cores' 8-entry tiles, the tensor
    // cores' 64-entry blocks): the scores of the many-token launch above, bit for bit.
    const int64_t few = 3;
    const std::vector<float> qf(q.begin(), q.begin() + few * H * Dh);
    const std::vector<float> wf(w.begin(), w.begin() + few * H);
    auto mf = MakeMeta({{0, ic.rate * max_entries - 7, static_cast<int>(few)}});
    const IdxRun cuda_few =
        RunV4Fp8Indexer(ic, *mf, qf, wf, pk, max_entries, few, true, false, fmt, stream);
    const IdxRun tc_few =
        RunV4Fp8Indexer(ic, *mf, qf, wf, pk, max_entries, few, true, true, fmt, stream);
    ASSERT_EQ(cuda_few.scores.size(), static_cast<size_t>(few) * max_entries);
    ASSERT_EQ(tc_few.scores.size(), cuda_few.scores.size());
    EXPECT_EQ(0, std::memcmp(cuda_few.scores.data(), tc.scores.data(), cuda_few.scores.size() * 4))
        << Dh;
    EXPECT_EQ(0, std::memcmp(tc_few.scores.data(), tc.scores.data(), tc_few.scores.size() * 4))
        << Dh;
  }
}

TEST(V41IndexerTest, Fp4QueryAndTwoLevelSelectionMatchCpuAndRowsAlone) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  const IdxCase cases[] = {
      {2, 8, 64, 16, 12, 4, 5}, {1, 5, 32, 8, 7, 2, 3}, {1, 16, 128, 64, 20, 8, 4}};
  for (const IdxCase& ic : cases) {
    const int max_entries = 160, seqs = 3;
    const int stride = (max_entries + ic.block_size - 1) / ic.block_size + 3;
    // Keys as stored: FP4-simulated (ue8m0, 32).
    std::vector<std::vector<float>> key_rows(seqs);
    for (int s = 0; s < seqs; ++s) {
      key_rows[s] = testing::RandomVector(static_cast<size_t>(max_entries) * ic.head_dim, 600 + s);
      for (int e = 0; e < max_entries; ++e)
        model::Fp4BlockSim(key_rows[s].data() + e * ic.head_dim, ic.head_dim, 32, false);
    }
    ListPool keys(seqs, max_entries, ic.head_dim);
    keys.Set(key_rows);
    // Rows: a long context (many blocks), a short one (all entries, few blocks), a middle one.
    const std::vector<Seg> segs = {{0, ic.rate * 140, 10}, {1, 0, 15}, {2, ic.rate * 20, 8}};
    auto m = MakeMeta(segs);
    const int64_t n = m->n();
    const int H = ic.heads, Dh = ic.head_dim;
    std::vector<std::vector<float>> q(3), w(3);
    for (int l = 0; l < 3; ++l) {
      q[l] = testing::RandomVector(static_cast<size_t>(n) * H * Dh, 700 + l);
      w[l] = testing::RandomVector(static_cast<size_t>(n) * H, 800 + l);
    }
    // Layer 0: candidate source; layer 1: masked by layer 0's blocks; layer 2: both (own mask).
    std::vector<IdxRun> batched(3), chunked(3), alone(3);
    batched[0] = RunIndexer(ic, *m, q[0], w[0], keys, max_entries, 0, {}, n, stream);
    batched[1] = RunIndexer(ic, *m, q[1], w[1], keys, max_entries, 1, batched[0].cand, n, stream);
    batched[2] = RunIndexer(ic, *m, q[2], w[2], keys, max_entries, 2, batched[0].cand, n, stream);
    chunked[0] = RunIndexer(ic, *m, q[0], w[0], keys, max_entries, 0, {}, 3, stream);
    chunked[1] = RunIndexer(ic, *m, q[1], w[1], keys, max_entries, 1, batched[0].cand, 3, stream);
    chunked[2] = RunIndexer(ic, *m, q[2], w[2], keys, max_entries, 2, batched[0].cand, 3, stream);
    // Each row alone (n = 1: the narrow scoring tiles).
    for (int l = 0; l < 3; ++l) {
      alone[l].sel.assign(static_cast<size_t>(n) * ic.topk, -7);
      alone[l].count.assign(static_cast<size_t>(n), -7);
      alone[l].cand.assign(static_cast<size_t>(n) * stride, 0);
      alone[l].scores.assign(static_cast<size_t>(n) * max_entries, NAN);
    }
    for (int64_t t = 0; t < n; ++t) {
      auto one = MakeMeta({{m->slot[t], m->pos[t], 1}});
      for (int l = 0; l < 3; ++l) {
        std::vector<float> qt(q[l].begin() + t * H * Dh, q[l].begin() + (t + 1) * H * Dh);
        std::vector<float> wt(w[l].begin() + t * H, w[l].begin() + (t + 1) * H);
        std::vector<uint8_t> ct(batched[0].cand.begin() + t * stride,
                                batched[0].cand.begin() + (t + 1) * stride);
        const IdxRun r = RunIndexer(ic, *one, qt, wt, keys, max_entries, l, ct, 1, stream);
        std::copy(r.sel.begin(), r.sel.end(), alone[l].sel.begin() + t * ic.topk);
        alone[l].count[t] = r.count[0];
        std::copy(r.cand.begin(), r.cand.end(), alone[l].cand.begin() + t * stride);
        std::copy(r.scores.begin(), r.scores.end(), alone[l].scores.begin() + t * max_entries);
      }
    }
    int bad_score_rows = 0;
    for (int l = 0; l < 3; ++l) {
      const IdxRun& g = batched[l];
      for (int64_t t = 0; t < n; ++t) {
        const int pos = m->pos[t];
        const int visible = (pos + 1) / ic.rate;
        const int blocks = (visible + ic.block_size - 1) / ic.block_size;
        const int k = std::min(ic.topk, visible);
        const bool computed = k < visible || (l != 1 && blocks > ic.topk_blocks);
        // The CPU's query (attention.cc): RoPE, then FP4 per head; the head weights' scale.
        std::vector<float> qt(q[l].begin() + t * H * Dh, q[l].begin() + (t + 1) * H * Dh);
        const int64_t p64 = pos;
        cpu::RopeRows(qt.data(), 1, H, Dh, ic.rope_dim, InvFreq(ic.rope_dim), &p64, false);
        for (int h = 0; h < H; ++h) model::Fp4BlockSim(qt.data() + h * Dh, Dh, 32, false);
        std::vector<float> wt(w[l].begin() + t * H, w[l].begin() + (t + 1) * H);
        const float head_scale = 1.0f / std::sqrt(static_cast<float>(H));
        for (float& v : wt) v *= head_scale;
        const std::vector<float> cpu_scores =
            v41::IndexScores(qt.data(), wt.data(), H, Dh, key_rows[m->slot[t]].data(), visible);
        std::vector<float> scores = cpu_scores;
        bool row_off = false;  // this row's GPU scores beyond the tolerance (see below)
        if (computed) {
          std::vector<float> gs(g.scores.begin() + t * max_entries,
                                g.scores.begin() + t * max_entries + visible);
          double err = 0, ref = 1e-30;
          for (int e = 0; e < visible; ++e) {
            err = std::max(err, std::fabs(double(gs[e]) - cpu_scores[e]));
            ref = std::max(ref, std::fabs(double(cpu_scores[e])));
          }
          if (err > 1e-4 * ref) {
            // A query value an ulp from an FP4 rounding boundary after RoPE (the GPU's rotation
            // may fuse its multiply-add) moves a whole row's scores: tolerated once per case.
            ++bad_score_rows;
            row_off = true;
            std::printf("[ scores ] layer %d row %lld: max error %.3g of %.3g\n", l,
                        static_cast<long long>(t), err, ref);
          }
          scores = gs;  // the selection must be exact on the GPU's own scores
        }
        // Candidate blocks (layers 0 and 2).
        std::vector<uint8_t> mask;
        if (l != 1) {
          mask = v41::SelectCandidateBlocks(scores, ic.topk_blocks, ic.block_size);
          for (int b = 0; b < stride; ++b) {
            const int want = b < blocks ? mask[b] : 0;
            ASSERT_EQ(g.cand[t * stride + b], want)
                << "layer " << l << " row " << t << " block " << b;
          }
        } else {
          mask.assign(batched[0].cand.begin() + t * stride,
                      batched[0].cand.begin() + t * stride + blocks);
        }
        const std::vector<int32_t> want =
            v41::SelectTopK(scores, ic.topk, l == 0 ? nullptr : &mask, ic.block_size);
        ASSERT_EQ(g.count[t], static_cast<int32_t>(want.size())) << "layer " << l << " row " << t;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(g.sel[t * ic.topk + i], want[i])
              << "layer " << l << " row " << t << " pick " << i;
        }
        // The picked entries' CPU scores against the CPU's own top scores (same selection rule).
        const std::vector<int32_t> cpu_pick =
            v41::SelectTopK(cpu_scores, ic.topk, l == 0 ? nullptr : &mask, ic.block_size);
        if (!row_off && cpu_pick.size() == want.size() && !want.empty()) {
          std::vector<float> a, b;
          for (int32_t e : want) a.push_back(cpu_scores[e]);
          for (int32_t e : cpu_pick) b.push_back(cpu_scores[e]);
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          EXPECT_LE(testing::RelativeError(a, b), 1e-3) << "layer " << l << " row " << t;
        }
        // Batch invariance: chunks of 3 rows and each row alone give the same bits.
        for (const IdxRun* o : {&chunked[l], &alone[l]}) {
          ASSERT_EQ(o->count[t], g.count[t]) << "layer " << l << " row " << t;
          for (int i = 0; i < g.count[t]; ++i)
            ASSERT_EQ(o->sel[t * ic.topk + i], g.sel[t * ic.topk + i]);
          if (l != 1) {
            for (int b = 0; b < stride; ++b)
              ASSERT_EQ(o->cand[t * stride + b], g.cand[t * stride + b]);
          }
        }
        if (computed) {
          for (int e = 0; e < visible; ++e) {
            ASSERT_TRUE(
                SameBits(alone[l].scores[t * max_entries + e], g.scores[t * max_entries + e]))
                << "layer " << l << " row " << t << " score " << e;
          }
        }
      }
    }
    EXPECT_LE(bad_score_rows, 1) << "rows whose scores differ from the CPU's beyond 1e-4";
  }
}

// ================================ Engram ================================

io::DeepseekV41Config EngramConfig() {
  io::DeepseekV41Config c;
  c.vocab_size = 500;
  c.engram_layer_ids = {1, 4};
  c.engram_num_embeddings = {20000, 20000};
  c.engram_vocab_size = 1000;
  c.engram_max_ngram_size = 4;
  c.engram_n_heads = 3;
  c.engram_head_dim = 32;
  c.engram_pad_id = 2;
  c.engram_compressed_vocab_size = 300;
  return c;
}

TEST(V41EngramTest, HashEqualsCpuAcrossChunksAndTheRing) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  const io::DeepseekV41Config c = EngramConfig();
  std::mt19937 rng(11);
  std::vector<int32_t> token_map(static_cast<size_t>(c.vocab_size));
  for (auto& v : token_map) v = static_cast<int32_t>(rng() % c.engram_compressed_vocab_size);
  auto built = v41::EngramHasher::Build(c, token_map);
  ASSERT_TRUE(built.ok()) << built.status().message();
  const v41::EngramHasher& h = *built;
  const int L = h.layers(), C = h.cols(), N = h.max_ngram;
  std::vector<int64_t> mult, primes, offsets;
  for (int l = 0; l < L; ++l) {
    mult.insert(mult.end(), h.multipliers[l].begin(), h.multipliers[l].end());
    primes.insert(primes.end(), h.primes[l].begin(), h.primes[l].end());
    offsets.insert(offsets.end(), h.offsets[l].begin(), h.offsets[l].end());
  }
  DeviceBuffer d_map = Upload(token_map), d_mult = Upload(mult), d_primes = Upload(primes),
               d_offsets = Upload(offsets);
  const std::vector<int> lengths = {23, 7, 2, 12};
  std::vector<std::vector<int32_t>> tokens(lengths.size());
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int i = 0; i < lengths[s]; ++i)
      tokens[s].push_back(static_cast<int32_t>(rng() % c.vocab_size));
  }
  for (const auto& schedule : {ChunkedSchedule(lengths, {4, 1, 6, 3}), RowSchedule(lengths)}) {
    RingPool ring(static_cast<int>(lengths.size()), N - 1 + 1, 1);
    int64_t checked = 0;
    for (const auto& call : schedule) {
      auto m = MakeMeta(call, &tokens);
      const int64_t n = m->n();
      DeviceBuffer d_out = Upload(std::vector<int64_t>(static_cast<size_t>(n) * L * C, -1));
      EngramHashParams p;
      p.meta = m->meta;
      p.tokens = ring.ref;
      p.token_map = d_map.as<int32_t>();
      p.vocab = static_cast<int64_t>(h.token_map.size());
      p.pad_id = h.pad_id;
      p.max_ngram = N;
      p.n_heads = h.n_heads;
      p.layers = L;
      p.multipliers = d_mult.as<int64_t>();
      p.primes = d_primes.as<int64_t>();
      p.offsets = d_offsets.as<int64_t>();
      p.hash_ids = d_out.as<int64_t>();
      LaunchEngramHash(p, stream.get());
      RingAppendParams a;  // the ids (int32 bits) into the token ring
      a.meta = m->meta;
      a.src = reinterpret_cast<const float*>(m->meta.ids);
      a.ld = 1;
      a.ring = ring.ref;
      LaunchRingAppend(a, stream.get());
      const std::vector<int64_t> got =
          Download<int64_t>(d_out, static_cast<size_t>(n) * L * C, stream);
      std::vector<int32_t> back(static_cast<size_t>(N));
      std::vector<int64_t> want(static_cast<size_t>(L) * C);
      for (int64_t t = 0; t < n; ++t) {
        const int s = m->slot[t], pos = m->pos[t];
        for (int k = 0; k < N; ++k) back[k] = pos - k < 0 ? -1 : tokens[s][pos - k];
        h.Hash(back.data(), want.data());
        for (int i = 0; i < L * C; ++i) {
          ASSERT_EQ(got[t * L * C + i], want[i])
              << "seq " << s << " position " << pos << " id " << i;
        }
        ++checked;
      }
    }
    EXPECT_EQ(checked, 23 + 7 + 2 + 12);
  }
}

TEST(V41EngramTest, GatherEqualsTableRowsInEveryFormat) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  const int64_t rows = 50, dim = 64, n = 9;
  const int cols = 6, stride = 2 * cols + 3, col0 = cols + 1;  // this layer's columns at col0
  std::mt19937 rng(21);
  std::vector<int64_t> ids(static_cast<size_t>(n) * stride, -1);
  for (int64_t t = 0; t < n; ++t) {
    for (int c = 0; c < cols; ++c) ids[t * stride + col0 + c] = static_cast<int64_t>(rng() % rows);
  }
  DeviceBuffer d_ids = Upload(ids);
  const std::vector<float> f32 = testing::RandomVector(static_cast<size_t>(rows * dim), 22);
  std::vector<uint16_t> bf16(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) bf16[i] = FloatToBf16(f32[i] * 3.0f);
  std::vector<uint8_t> e4m3(f32.size());
  for (auto& b : e4m3) {
    do b = static_cast<uint8_t>(rng() & 0xff);
    while ((b & 0x7f) == 0x7f);  // no NaN codes
  }
  std::vector<float> scale(static_cast<size_t>(rows * dim / 32));
  for (auto& s : scale)
    s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                   static_cast<int>(rng() % 20) - 10);
  DeviceBuffer d_f32 = Upload(f32), d_bf16 = Upload(bf16), d_e4m3 = Upload(e4m3),
               d_scale = Upload(scale);
  for (int format = 0; format < 3; ++format) {
    DeviceBuffer d_out(static_cast<size_t>(n * cols * dim) * sizeof(float));
    EngramGatherParams p;
    p.hash_ids = d_ids.as<int64_t>() + col0;
    p.hash_stride = stride;
    p.cols = cols;
    p.dim = dim;
    p.table = format == 0 ? d_f32.get() : format == 1 ? d_bf16.get() : d_e4m3.get();
    p.table_format = format;
    p.scale = format == 2 ? d_scale.as<float>() : nullptr;
    p.n = n;
    p.out = d_out.as<float>();
    LaunchEngramGather(p, stream.get());
    const std::vector<float> got =
        Download<float>(d_out, static_cast<size_t>(n * cols * dim), stream);
    for (int64_t t = 0; t < n; ++t) {
      for (int c = 0; c < cols; ++c) {
        const int64_t r = ids[t * stride + col0 + c];
        for (int64_t i = 0; i < dim; ++i) {
          // EngramTable::Row of each format.
          float want;
          if (format == 0)
            want = f32[r * dim + i];
          else if (format == 1)
            want = Bf16ToFloat(bf16[r * dim + i]);
          else
            want = E4M3ToFloat(e4m3[r * dim + i]) * scale[r * (dim / 32) + i / 32];
          ASSERT_TRUE(SameBits(got[(t * cols + c) * dim + i], want))
              << "format " << format << " row " << t << " col " << c << " [" << i << "]";
        }
      }
    }
  }
}

// EngramForward's gate step (engram.cc, after wkv), on the host.
void GateReference(const float* kv, const float* qk, float* X, int64_t n, int hc, int64_t D,
                   float eps) {
  const float inv_sqrt_d = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t t = 0; t < n; ++t) {
    const float* key = kv + t * (hc + 1) * D;
    const float* value = key + hc * D;
    for (int64_t s = 0; s < hc; ++s) {
      float* h = X + (t * hc + s) * D;
      const float* k = key + s * D;
      const float* wq = qk + s * D;
      double hh = 0.0, kk = 0.0, dot = 0.0;
      for (int64_t i = 0; i < D; ++i) {
        hh += static_cast<double>(h[i]) * h[i];
        kk += static_cast<double>(k[i]) * k[i];
        dot += static_cast<double>(h[i] * wq[i] * k[i]);
      }
      const float rstd = (1.0f / std::sqrt(static_cast<float>(hh / D) + eps)) *
                         (1.0f / std::sqrt(static_cast<float>(kk / D) + eps));
      const float d = static_cast<float>(dot) * rstd * inv_sqrt_d;
      const float mag = std::sqrt(std::max(std::fabs(d), 1e-6f));
      const float gate = 1.0f / (1.0f + std::exp(-std::copysign(mag, d)));
      for (int64_t i = 0; i < D; ++i) h[i] += gate * value[i];
    }
  }
}

TEST(V41EngramTest, GateMatchesCpuAndRowsAlone) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  for (int64_t D : {200, 1024}) {
    const int64_t n = 7;
    const int hc = 4;
    const std::vector<float> kv =
        testing::RandomVector(static_cast<size_t>(n * (hc + 1) * D), 31, 0.5f);
    const std::vector<float> qk = testing::RandomVector(static_cast<size_t>(hc * D), 32);
    const std::vector<float> X = testing::RandomVector(static_cast<size_t>(n * hc * D), 33, 2.0f);
    std::vector<float> want = X;
    GateReference(kv.data(), qk.data(), want.data(), n, hc, D, 1e-6f);
    DeviceBuffer d_kv = Upload(kv), d_qk = Upload(qk), d_x = Upload(X), d_x1 = Upload(X);
    EngramGateParams p;
    p.kv = d_kv.as<float>();
    p.qk_weight = d_qk.as<float>();
    p.X = d_x.as<float>();
    p.n = n;
    p.hc = hc;
    p.D = D;
    p.eps = 1e-6f;
    LaunchEngramGate(p, stream.get());
    for (int64_t t = 0; t < n; ++t) {  // each row alone
      EngramGateParams q = p;
      q.kv = d_kv.as<float>() + t * (hc + 1) * D;
      q.X = d_x1.as<float>() + t * hc * D;
      q.n = 1;
      LaunchEngramGate(q, stream.get());
    }
    const std::vector<float> got = Download<float>(d_x, X.size(), stream);
    const std::vector<float> alone = Download<float>(d_x1, X.size(), stream);
    double worst = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int s = 0; s < hc; ++s) {
        for (int64_t i = 0; i < D; ++i) {
          const int64_t j = (t * hc + s) * D + i;
          const double value = kv[t * (hc + 1) * D + hc * D + i];
          const double scale = std::fabs(X[j]) + std::fabs(value);
          worst = std::max(worst, std::fabs(double(got[j]) - want[j]) / scale);
          ASSERT_TRUE(SameBits(got[j], alone[j]))
              << "row " << t << " stream " << s << " [" << i << "]";
        }
      }
    }
    std::printf("[ error ] engram gate D %lld: %.3g\n", static_cast<long long>(D), worst);
    EXPECT_LE(worst, 1e-6);
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda::v41_test
