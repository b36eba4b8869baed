// DeepSeek-V4.1's device ops against the CPU reference (model/deepseek_v41), first part: the fake
// quantizers bit for bit, the compressor's latent / FP4 entries and the index keys (CompressTokens'
// steps), and DeepSeek-V4's FP8 cache rounding. gpu_v41_indexer_test.cc has the indexer and the
// Engram. Every op also runs row by row against batched chunks: a row's bits must not depend on the
// other rows or the chunking.
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
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "gpu_v41_fixtures.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v41/indexer.h"
#include "model/quant_sim.h"
#include "test_util.h"

namespace dsinfer::backend::cuda::v41_test {
namespace {

// ================================ fake quantizers ================================

// Rows of awkward values for one quantizer: plain, tiny and huge magnitudes, zeros, subnormals,
// exact rounding ties of the e2m1 / e4m3 grids under an exact block scale, mixed exponents.
std::vector<float> QuantRows(FakeQuant kind, int block, int rows, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ed(-40, 40), sd(0, 1);
  std::vector<float> x(static_cast<size_t>(rows) * dim);
  static constexpr float kE2m1Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                                        0.5f,  1.5f,  3.0f,  6.0f,  0.0f, 4.0f, 2.0f};
  for (int r = 0; r < rows; ++r) {
    float* v = x.data() + static_cast<int64_t>(r) * dim;
    const int type = r % 9;
    for (int i = 0; i < dim; ++i) {
      const float sign = sd(rng) ? -1.0f : 1.0f;
      switch (type) {
        case 0:
          v[i] = nd(rng);
          break;
        case 1:
          v[i] = std::ldexp(nd(rng), -20);
          break;
        case 2:
          v[i] = std::ldexp(nd(rng), 25);
          break;
        case 3:
          v[i] = 0.0f;
          break;
        case 4:
          v[i] = nd(rng) * 1e-40f;
          break;  // subnormal
        case 5:
          v[i] = std::ldexp(nd(rng), ed(rng));
          break;  // mixed exponents
        case 6:
          v[i] = sign * std::min(std::fabs(nd(rng)), 4.0f) * 8e37f;
          break;  // huge (finite)
        case 7:
          v[i] = (i / block) % 2 == 0 ? 0.0f : nd(rng);
          break;    // zero blocks
        default: {  // exact ties: the block's first value fixes the scale
          const int k = (r / 9) % 7 - 3;
          const int j = i % block;
          if (kind == FakeQuant::kFp8Pow2) {
            // s = 2^k; e4m3 midpoints (1 + (2m+1)/16) 2^e and subnormal midpoints (m + 0.5) 2^-9.
            if (j == 0) {
              v[i] = std::ldexp(448.0f, k);
            } else if (j % 2 == 0) {
              v[i] = sign * std::ldexp(1.0f + (2 * (j % 8) + 1) / 16.0f, (j % 13) - 6 + k);
            } else {
              v[i] = sign * std::ldexp((j % 8) + 0.5f, -9 + k);
            }
          } else {
            const float s =
                kind == FakeQuant::kFp4E4m3 ? std::ldexp(1.125f, k) : std::ldexp(1.0f, k);
            v[i] = j == 0 ? 6.0f * s : sign * kE2m1Ties[j % 14] * s;
          }
        }
      }
    }
  }
  return x;
}

TEST(V41FakeQuantTest, RowsMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  struct QCase {
    FakeQuant kind;
    int block, dim;
  };
  const QCase cases[] = {{FakeQuant::kFp8Pow2, 32, 128}, {FakeQuant::kFp4E4m3, 16, 64},
                         {FakeQuant::kFp4Pow2, 32, 128}, {FakeQuant::kFp4Pow2, 16, 48},
                         {FakeQuant::kFp4E4m3, 16, 512}, {FakeQuant::kFp8Pow2, 32, 40},
                         {FakeQuant::kFp8Pow2, 64, 448}, {FakeQuant::kBf16, 64, 64}};
  for (const QCase& qc : cases) {
    const int rows = 63, ld = qc.dim + 3;
    const std::vector<float> src = QuantRows(qc.kind, qc.block, rows, qc.dim, 7u + qc.dim);
    std::vector<float> x(static_cast<size_t>(rows) * ld, 42.0f);
    for (int r = 0; r < rows; ++r) std::copy_n(src.data() + r * qc.dim, qc.dim, x.data() + r * ld);
    DeviceBuffer d = Upload(x);
    LaunchFakeQuantRows(d.as<float>(), rows, ld, qc.dim, qc.kind, qc.block, stream.get());
    const std::vector<float> got = Download<float>(d, x.size(), stream);
    int bad = 0;
    for (int r = 0; r < rows; ++r) {
      std::vector<float> ref(src.begin() + r * qc.dim, src.begin() + (r + 1) * qc.dim);
      if (qc.kind == FakeQuant::kFp8Pow2) {
        model::Fp8BlockSim(ref.data(), qc.dim, qc.block);
      } else if (qc.kind == FakeQuant::kBf16) {
        for (float& v : ref) v = RoundToBf16(v);
      } else {
        model::Fp4BlockSim(ref.data(), qc.dim, qc.block, qc.kind == FakeQuant::kFp4E4m3);
      }
      for (int i = 0; i < ld; ++i) {
        const float want = i < qc.dim ? ref[i] : 42.0f;
        if (!SameBits(got[r * ld + i], want) && bad++ < 5) {
          ADD_FAILURE() << "kind " << static_cast<int>(qc.kind) << " block " << qc.block << " row "
                        << r << " [" << i << "]: input " << (i < qc.dim ? src[r * qc.dim + i] : 0)
                        << " gpu " << got[r * ld + i] << " cpu " << want;
        }
      }
    }
    EXPECT_EQ(bad, 0) << "kind " << static_cast<int>(qc.kind) << " block " << qc.block;
  }
}

TEST(V41FakeQuantTest, RowsNotAMultipleOfTheBlockAreLeftAsIs) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  const std::vector<float> x = testing::RandomVector(5 * 40, 3);
  DeviceBuffer d = Upload(x);
  LaunchFakeQuantRows(d.as<float>(), 5, 40, 40, FakeQuant::kFp4Pow2, 32, stream.get());
  std::vector<float> got = Download<float>(d, x.size(), stream);
  std::vector<float> ref = x;
  for (int r = 0; r < 5; ++r) model::Fp4BlockSim(ref.data() + r * 40, 40, 32, false);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_TRUE(SameBits(got[i], ref[i]) && SameBits(got[i], x[i]));
}

// ================================ compressor ================================

// The e4m3 / power-of-two block scale the CPU gives a block (for the one-step allowance).
float CpuBlockScale(const float* x, int block, bool e4m3) {
  float amax = 0.0f;
  for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (e4m3) return E4M3ToFloat(FloatToE4M3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
  return model::Pow2CeilScale(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / 6.0f));
}

// FP4 rows against the CPU's: equal, except values where the CPU's pre-quantization value sits
// next to a rounding boundary and the GPU's (an ulp away) lands one grid step over. Allowed: at
// most max(2, 0.5%) of the values, each within one grid step (2 * the CPU block's scale).
void ExpectFp4Close(const std::vector<float>& got, const std::vector<float>& want,
                    const std::vector<float>& pre, int dim, int block, bool e4m3,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (SameBits(got[i], want[i]) || (got[i] == 0.0f && want[i] == 0.0f)) continue;
    ++differ;
    const size_t b0 = i / block * block;
    const float s = CpuBlockScale(pre.data() + b0, block, e4m3);
    EXPECT_LE(std::fabs(got[i] - want[i]), 2.0f * s * 1.0001f)
        << what << " value " << i << " (row " << i / dim << "): gpu " << got[i] << " cpu "
        << want[i] << " pre-quantization " << pre[i];
  }
  std::printf("[ fp4 ] %s: %lld of %zu values one grid step off the CPU's\n", what,
              static_cast<long long>(differ), got.size());
  EXPECT_LE(differ, std::max<int64_t>(2, static_cast<int64_t>(got.size()) / 200)) << what;
}

// DeepSeek-V4's FP8 cache on the device against the CPU's model/quant_sim: the indexer's queries
// (RoPE, Hadamard, FP4 per head: LaunchIndexQueryRound) and the K=V rows (RMSNorm + RoPE, then
// fp8 nope dims in blocks of 64 and bf16 RoPE dims: RmsNormRope's kv_fp8_block), over several
// shapes. The RoPE's cos / sin differ from the CPU's in the last bits, so a value next to a
// rounding boundary may land one grid step over (ExpectFp4Close; FP8: within one e4m3 step).
TEST(V4Fp8CacheTest, IndexQueriesAndKvRowsRoundAsTheCpu) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  struct QShape {
    int heads, dim, rope;
  };
  for (const QShape& qs : {QShape{64, 128, 64}, QShape{4, 64, 64}, QShape{12, 32, 16}}) {
    const int n = 9;
    const std::vector<float> q =
        testing::RandomVector(static_cast<size_t>(n) * qs.heads * qs.dim, 31);
    std::vector<int32_t> pos(n);
    for (int t = 0; t < n; ++t) pos[t] = 3 + 97 * t;
    const std::vector<float> inv = InvFreq(qs.rope);
    DeviceBuffer dq = Upload(q), dpos = Upload(pos), dinv = Upload(inv);
    IndexQueryRoundParams p;
    p.q = dq.as<float>();
    p.n = n;
    p.heads = qs.heads;
    p.head_dim = qs.dim;
    p.rope_dim = qs.rope;
    p.inv_freq = dinv.as<float>();
    p.pos = dpos.as<int32_t>();
    LaunchIndexQueryRound(p, stream.get());
    const std::vector<float> got = Download<float>(dq, q.size(), stream);
    std::vector<float> pre = q, want;
    for (int t = 0; t < n; ++t) {
      const int64_t p64 = pos[t];
      float* row = pre.data() + static_cast<int64_t>(t) * qs.heads * qs.dim;
      cpu::RopeRows(row, 1, qs.heads, qs.dim, qs.rope, inv, &p64, false);
      for (int h = 0; h < qs.heads; ++h) model::HadamardRotate(row + h * qs.dim, qs.dim);
    }
    want = pre;
    for (int r = 0; r < n * qs.heads; ++r)
      model::Fp4BlockSim(want.data() + r * qs.dim, qs.dim, 32, false);
    ExpectFp4Close(got, want, pre, qs.dim, 32, false, "index queries");
  }
  for (int dim : {512, 192}) {
    const int rope = 64, n = 7;
    const std::vector<float> x = testing::RandomVector(static_cast<size_t>(n) * dim, 41, 3.0f);
    std::vector<float> w = testing::RandomVector(dim, 42, 0.2f);
    for (float& v : w) v += 1.0f;
    std::vector<int32_t> pos(n);
    for (int t = 0; t < n; ++t) pos[t] = 11 * t;
    const std::vector<float> inv = InvFreq(rope);
    DeviceBuffer dx = Upload(x), dw = Upload(w), dpos = Upload(pos), dinv = Upload(inv);
    RmsNormRopeParams p;
    p.norm.x = dx.as<float>();
    p.norm.ldx = dim;
    p.norm.y = dx.as<float>();
    p.norm.ldy = dim;
    p.norm.rows = n;
    p.norm.dim = dim;
    p.norm.weight = dw.as<float>();
    p.norm.eps = 1e-6f;
    p.heads = 1;
    p.rope_dim = rope;
    p.inv_freq = dinv.as<float>();
    p.pos = dpos.as<int32_t>();
    p.kv_fp8_block = 64;
    // The state's packed rows too (an odd row stride in floats: rows only 4-byte aligned).
    const model::KvFormat f(model::KvQuant::kFp8BfTail, dim, 64, rope);
    const int64_t packed_ld = f.row_floats() + 1;
    DeviceBuffer dpk = Upload(std::vector<float>(static_cast<size_t>(n * packed_ld), NAN));
    p.kv_packed = dpk.as<float>();
    p.kv_packed_ld = packed_ld;
    LaunchRmsNormRope(p, stream.get());
    const std::vector<float> got = Download<float>(dx, x.size(), stream);
    {  // the packed rows decode to the rounded rows, bit for bit
      const std::vector<float> pk =
          Download<float>(dpk, static_cast<size_t>(n * packed_ld), stream);
      std::vector<float> back(static_cast<size_t>(dim));
      for (int t = 0; t < n; ++t) {
        f.Unpack(pk.data() + t * packed_ld, back.data());
        for (int c = 0; c < dim; ++c)
          ASSERT_TRUE(SameBits(back[c], got[static_cast<size_t>(t) * dim + c]))
              << "dim " << dim << " row " << t << " value " << c;
      }
    }
    std::vector<float> pre = x;
    std::vector<int64_t> pos64(pos.begin(), pos.end());
    cpu::RmsNorm(pre.data(), n, dim, w.data(), 1e-6f);
    cpu::RopeRows(pre.data(), n, 1, dim, rope, inv, pos64.data(), false);
    std::vector<float> want = pre, packed(static_cast<size_t>(f.row_floats()));
    for (int t = 0; t < n; ++t) f.Pack(want.data() + t * dim, packed.data());
    int off_step = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (SameBits(got[i], want[i])) continue;
      ++off_step;  // within one e4m3 step (1/8 of the value; subnormal: 2^-9 of the scale) or
                   // one bf16 step
      const size_t b0 = i / 64 * 64;
      float amax = 0.0f;
      for (size_t k = b0; k < b0 + 64 && k % dim < static_cast<size_t>(dim - rope); ++k)
        amax = std::max(amax, std::fabs(pre[k]));
      const float sub_step = model::Pow2CeilScale(std::max(amax, 1e-4f) / 448.0f) * 0x1p-9f;
      EXPECT_LE(std::fabs(got[i] - want[i]),
                std::max(0.13f * std::max(std::fabs(want[i]), std::fabs(got[i])), 1.01f * sub_step))
          << "dim " << dim << " value " << i << ": gpu " << got[i] << " cpu " << want[i];
    }
    std::printf("[ fp8 ] K=V rows, dim %d: %d of %zu values one step off the CPU's\n", dim,
                off_step, got.size());
    EXPECT_LE(off_step, std::max<int>(2, static_cast<int>(got.size()) / 200)) << dim;
  }
}

// CompressEmit's params over one call's rows (non-overlapping windows, eps 1e-6); the caller sets
// the entries' rounding.
CompressEmitParams EmitParams(const TokenMeta& meta, const float* proj, const RingRef& rows,
                              const ListRef& entries, int rate, int dim, const float* norm,
                              int rope_dim, const float* inv_freq) {
  CompressEmitParams p;
  p.meta = meta;
  p.proj = proj;
  p.rows = rows;
  p.entries = entries;
  p.rate = rate;
  p.dim = dim;
  p.overlap = false;
  p.norm = norm;
  p.eps = 1e-6f;
  p.rope_dim = rope_dim;
  p.inv_freq = inv_freq;
  return p;
}

// DeepSeek-V4's FP8 cache: the compressor's packed entries (entry_packed: the state's rows) decode
// to the entries it stores unpacked, bit for bit, for the K=V entries (e4m3 blocks of 64, the RoPE
// dims a bf16 tail) and the index keys (the Hadamard, then e2m1 blocks of 32), decoded by the
// CPU's KvFormat::Unpack.
TEST(V4Fp8CacheTest, PackedEntriesDecodeToTheUnpackedEntries) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  struct EShape {
    int dim, rope;
    bool index_keys;
  };
  for (const EShape& es : {EShape{512, 64, false}, EShape{128, 64, true}}) {
    const int rate = 4, n = 64, dim = es.dim;
    const model::KvFormat f = es.index_keys
                                  ? model::KvFormat(model::KvQuant::kFp4Pow2, dim, 32)
                                  : model::KvFormat(model::KvQuant::kFp8BfTail, dim, 64, es.rope);
    ASSERT_TRUE(f.packed());
    const int width = static_cast<int>(f.row_floats());
    auto m = MakeMeta({{0, 0, n}});
    const std::vector<float> proj =
        testing::RandomVector(static_cast<size_t>(n) * 2 * dim, 51 + dim, 2.0f);
    std::vector<float> norm = testing::RandomVector(dim, 52, 0.2f);
    for (float& v : norm) v += 1.0f;
    DeviceBuffer d_proj = Upload(proj), d_norm = Upload(norm), d_freq = Upload(InvFreq(es.rope));
    RingPool ring(1, rate + 1, 2 * dim);
    auto run = [&](bool packed, ListPool& entries) {
      CompressEmitParams p = EmitParams(m->meta, d_proj.as<float>(), ring.ref, entries.ref, rate,
                                        dim, d_norm.as<float>(), es.rope, d_freq.as<float>());
      p.entry_hadamard = es.index_keys;
      p.entry_quant = es.index_keys ? FakeQuant::kFp4Pow2 : FakeQuant::kFp8Pow2;
      p.entry_block = es.index_keys ? 32 : 64;
      p.entry_bf16_tail = es.index_keys ? 0 : es.rope;
      p.entry_packed = packed;
      LaunchCompressEmit(p, stream.get());
      return entries.Host(stream);
    };
    ListPool plain(1, n / rate + 1, dim), packed(1, n / rate + 1, width);
    plain.Fill(NAN, stream);
    packed.Fill(NAN, stream);
    const std::vector<float> a = run(false, plain), b = run(true, packed);
    std::vector<float> back(static_cast<size_t>(dim));
    for (int w = 0; w < n / rate; ++w) {
      const float* row = b.data() + packed.Offset(0, w);
      const float* want = a.data() + plain.Offset(0, w);
      f.Unpack(row, back.data());
      for (int c = 0; c < dim; ++c)
        ASSERT_TRUE(SameBits(back[c], want[c]))
            << "dim " << dim << " entry " << w << " value " << c;
    }
  }
}

struct CompressResult {
  std::vector<std::vector<float>> latent;   // [seq][entries * dim] latent_out rows
  std::vector<std::vector<float>> entries;  // [seq][entries * dim] stored entries
};

// Runs V4.1's compressor (CompressEmit with latent_out + FP4 entries, then RingAppend) over the
// sequences under one schedule.
CompressResult RunCompressor(const std::vector<std::vector<Seg>>& calls,
                             const std::vector<std::vector<float>>& kv,
                             const std::vector<std::vector<float>>& gate,
                             const std::vector<int>& lengths, int rate, int dim, int rope_dim,
                             const std::vector<float>& norm, const std::vector<float>& inv_freq,
                             const Stream& stream) {
  const int seqs = static_cast<int>(lengths.size());
  const int capacity = *std::max_element(lengths.begin(), lengths.end()) / rate + 1;
  ListPool entries(seqs, capacity, dim);
  entries.Fill(-1.0f, stream);
  RingPool ring(seqs, rate + 1, 2 * dim);
  DeviceBuffer d_norm = Upload(norm), d_freq = Upload(inv_freq);
  CompressResult res;
  res.latent.resize(seqs);
  for (int s = 0; s < seqs; ++s)
    res.latent[s].assign(static_cast<size_t>(lengths[s] / rate) * dim, NAN);
  constexpr float kSentinel = 777.0f;
  for (const auto& call : calls) {
    auto m = MakeMeta(call);
    const int64_t n = m->n();
    std::vector<float> proj(static_cast<size_t>(n) * 2 * dim);
    for (int64_t t = 0; t < n; ++t) {
      const int s = m->slot[t], p = m->pos[t];
      std::copy_n(kv[s].data() + static_cast<int64_t>(p) * dim, dim, proj.data() + t * 2 * dim);
      std::copy_n(gate[s].data() + static_cast<int64_t>(p) * dim, dim,
                  proj.data() + t * 2 * dim + dim);
    }
    DeviceBuffer d_proj = Upload(proj);
    DeviceBuffer d_latent = Upload(std::vector<float>(static_cast<size_t>(n) * dim, kSentinel));
    CompressEmitParams p = EmitParams(m->meta, d_proj.as<float>(), ring.ref, entries.ref, rate, dim,
                                      d_norm.as<float>(), rope_dim, d_freq.as<float>());
    p.latent_out = d_latent.as<float>();
    p.entry_quant = FakeQuant::kFp4E4m3;
    p.entry_block = 16;
    LaunchCompressEmit(p, stream.get());
    RingAppendParams a;
    a.meta = m->meta;
    a.src = d_proj.as<float>();
    a.ld = 2 * dim;
    a.ring = ring.ref;
    LaunchRingAppend(a, stream.get());
    const std::vector<float> lat = Download<float>(d_latent, static_cast<size_t>(n) * dim, stream);
    for (int64_t t = 0; t < n; ++t) {
      const int s = m->slot[t], pos = m->pos[t];
      const float* row = lat.data() + t * dim;
      if ((pos + 1) % rate == 0) {
        std::copy_n(row, dim,
                    res.latent[s].data() + static_cast<int64_t>((pos + 1) / rate - 1) * dim);
      } else {
        int touched = 0;
        for (int c = 0; c < dim; ++c) touched += row[c] != kSentinel;
        EXPECT_EQ(touched, 0) << "latent_out written for the row at position " << pos;
      }
    }
  }
  const std::vector<float> pool = entries.Host(stream);
  res.entries.resize(seqs);
  for (int s = 0; s < seqs; ++s) {
    for (int g = 0; g < lengths[s] / rate; ++g) {
      const float* e = pool.data() + entries.Offset(s, g);
      res.entries[s].insert(res.entries[s].end(), e, e + dim);
    }
  }
  return res;
}

TEST(V41CompressorTest, LatentAndFp4EntriesMatchCpuAndChunkingGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  for (int rate : {1, 2}) {
    for (int dim : {64, 80}) {
      const int rope_dim = 16;
      const std::vector<int> lengths = {37, 20, 9};
      std::vector<std::vector<float>> kv, gate;
      for (size_t s = 0; s < lengths.size(); ++s) {
        kv.push_back(testing::RandomVector(static_cast<size_t>(lengths[s]) * dim, 100 + s));
        gate.push_back(testing::RandomVector(static_cast<size_t>(lengths[s]) * dim, 200 + s, 2.0f));
      }
      std::vector<float> norm = testing::RandomVector(dim, 300, 0.1f);
      for (float& v : norm) v += 1.0f;
      const std::vector<float> inv_freq = InvFreq(rope_dim);
      const CompressResult chunked =
          RunCompressor(ChunkedSchedule(lengths, {5, 1, 8, 3, 16}), kv, gate, lengths, rate, dim,
                        rope_dim, norm, inv_freq, stream);
      const CompressResult rows = RunCompressor(RowSchedule(lengths), kv, gate, lengths, rate, dim,
                                                rope_dim, norm, inv_freq, stream);
      for (size_t s = 0; s < lengths.size(); ++s) {
        // The CPU's steps (compressor.cc): pool, RmsNorm, (latent), RoPE at g * r, FP4 e4m3/16.
        const int G = lengths[s] / rate;
        std::vector<float> latent(static_cast<size_t>(G) * dim);
        for (int g = 0; g < G; ++g) {
          for (int ch = 0; ch < dim; ++ch) {
            if (rate == 1) {
              latent[g * dim + ch] = kv[s][g * dim + ch];
              continue;
            }
            auto k_at = [&](int j) { return kv[s][static_cast<int64_t>(g * rate + j) * dim + ch]; };
            auto g_at = [&](int j) {
              return gate[s][static_cast<int64_t>(g * rate + j) * dim + ch];
            };
            float m = -INFINITY;
            for (int j = 0; j < rate; ++j) m = std::max(m, g_at(j));
            float den = 0.0f;
            for (int j = 0; j < rate; ++j) den += std::exp(g_at(j) - m);
            float acc = 0.0f;
            for (int j = 0; j < rate; ++j) acc += k_at(j) * (std::exp(g_at(j) - m) / den);
            latent[g * dim + ch] = acc;
          }
        }
        cpu::RmsNorm(latent.data(), G, dim, norm.data(), 1e-6f);
        std::vector<float> entry = latent;
        std::vector<int64_t> pos(static_cast<size_t>(G));
        for (int g = 0; g < G; ++g) pos[g] = int64_t{g} * rate;
        cpu::RopeRows(entry.data(), G, 1, dim, rope_dim, inv_freq, pos.data(), false);
        const std::vector<float> pre = entry;
        for (int g = 0; g < G; ++g) model::Fp4BlockSim(entry.data() + g * dim, dim, 16, true);

        EXPECT_LE(testing::RelativeError(chunked.latent[s], latent), 1e-5)
            << "rate " << rate << " dim " << dim << " seq " << s;
        ExpectFp4Close(chunked.entries[s], entry, pre, dim, 16, true, "compressed entries");
        for (size_t i = 0; i < latent.size(); ++i) {
          ASSERT_TRUE(SameBits(chunked.latent[s][i], rows.latent[s][i])) << "latent " << i;
          ASSERT_TRUE(SameBits(chunked.entries[s][i], rows.entries[s][i])) << "entry value " << i;
        }
      }
    }
  }
}

// ================================ index keys ================================

std::vector<std::vector<float>> RunIndexKeys(const std::vector<std::vector<Seg>>& calls,
                                             const std::vector<std::vector<float>>& keys,
                                             const std::vector<int>& lengths, int rate, int dim,
                                             int rope_dim, const std::vector<float>& norm,
                                             const std::vector<float>& inv_freq,
                                             const Stream& stream) {
  const int seqs = static_cast<int>(lengths.size());
  const int capacity = *std::max_element(lengths.begin(), lengths.end()) / rate + 1;
  ListPool entries(seqs, capacity, dim);
  entries.Fill(-1.0f, stream);
  DeviceBuffer d_norm = Upload(norm), d_freq = Upload(inv_freq);
  for (const auto& call : calls) {
    auto m = MakeMeta(call);
    const int64_t n = m->n();
    // Rows that close no window hold NaN: the kernel must not read them.
    std::vector<float> k(static_cast<size_t>(n) * dim, NAN);
    for (int64_t t = 0; t < n; ++t) {
      const int s = m->slot[t], p = m->pos[t];
      if ((p + 1) % rate == 0) {
        std::copy_n(keys[s].data() + static_cast<int64_t>((p + 1) / rate - 1) * dim, dim,
                    k.data() + t * dim);
      }
    }
    DeviceBuffer d_k = Upload(k);
    IndexKeyEmitParams p;
    p.meta = m->meta;
    p.keys = d_k.as<float>();
    p.entries = entries.ref;
    p.rate = rate;
    p.dim = dim;
    p.norm = d_norm.as<float>();
    p.eps = 1e-6f;
    p.rope_dim = rope_dim;
    p.inv_freq = d_freq.as<float>();
    p.fp4_block = 32;
    LaunchIndexKeyEmit(p, stream.get());
    stream.Synchronize();
  }
  const std::vector<float> pool = entries.Host(stream);
  std::vector<std::vector<float>> out(seqs);
  for (int s = 0; s < seqs; ++s) {
    for (int g = 0; g < lengths[s] / rate; ++g) {
      const float* e = pool.data() + entries.Offset(s, g);
      out[s].insert(out[s].end(), e, e + dim);
    }
  }
  return out;
}

TEST(V41IndexKeyTest, MatchesCpuAndChunkingGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  Stream stream;
  for (int rate : {1, 2}) {
    for (int dim : {64, 128}) {
      const int rope_dim = 16;
      const std::vector<int> lengths = {41, 18, 5};
      std::vector<std::vector<float>> keys;  // [entries, dim] wk · latent of each entry
      for (size_t s = 0; s < lengths.size(); ++s) {
        keys.push_back(
            testing::RandomVector(static_cast<size_t>(lengths[s] / rate) * dim, 400 + s, 3.0f));
      }
      std::vector<float> norm = testing::RandomVector(dim, 500, 0.2f);
      for (float& v : norm) v += 1.0f;
      const std::vector<float> inv_freq = InvFreq(rope_dim);
      const auto chunked = RunIndexKeys(ChunkedSchedule(lengths, {7, 2, 1, 12}), keys, lengths,
                                        rate, dim, rope_dim, norm, inv_freq, stream);
      const auto rows = RunIndexKeys(RowSchedule(lengths), keys, lengths, rate, dim, rope_dim, norm,
                                     inv_freq, stream);
      for (size_t s = 0; s < lengths.size(); ++s) {
        const int G = lengths[s] / rate;
        std::vector<float> k = keys[s];
        cpu::RmsNorm(k.data(), G, dim, norm.data(), 1e-6f);
        std::vector<int64_t> pos(static_cast<size_t>(G));
        for (int g = 0; g < G; ++g) pos[g] = int64_t{g} * rate;
        cpu::RopeRows(k.data(), G, 1, dim, rope_dim, inv_freq, pos.data(), false);
        const std::vector<float> pre = k;
        for (int g = 0; g < G; ++g) model::Fp4BlockSim(k.data() + g * dim, dim, 32, false);
        ExpectFp4Close(chunked[s], k, pre, dim, 32, false, "index keys");
        ASSERT_EQ(chunked[s].size(), rows[s].size());
        for (size_t i = 0; i < k.size(); ++i) {
          ASSERT_TRUE(SameBits(chunked[s][i], rows[s][i])) << "rate " << rate << " key value " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda::v41_test
