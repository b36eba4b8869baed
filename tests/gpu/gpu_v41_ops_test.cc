// DeepSeek-V4.1's device ops against the CPU reference (model/deepseek_v41): the fake quantizers
// bit for bit, the compressor's latent / FP4 entries and the index keys (CompressTokens' steps),
// the indexer's FP4 query and two-level selection (IndexScores, SelectCandidateBlocks, SelectTopK),
// and the Engram hash (exact), gather (exact) and gate (1e-6). Every op also runs row by row
// against batched chunks: a row's bits must not depend on the other rows or the chunking.
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
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/runtime.h"
#include "base/dtype.h"
#include "gpu_test_util.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/indexer.h"
#include "model/quant_sim.h"
#include "test_util.h"

namespace dsinfer::backend::cuda {
namespace {

namespace v41 = model::deepseek_v41;

bool SameBits(float a, float b) { return FloatToBits(a) == FloatToBits(b); }

// ---- per-token metadata of one call ----

struct Seg {
  int slot, start, count;
};

struct Meta {
  std::vector<int32_t> ids, pos, slot, seg_begin, seg_start, seg_count;
  DeviceBuffer d_ids, d_pos, d_slot, d_begin, d_start, d_count;
  TokenMeta meta;
  int64_t n() const { return static_cast<int64_t>(pos.size()); }
};

// Rows of the segments in order; ids from tokens[slot][pos] (when given).
std::unique_ptr<Meta> MakeMeta(const std::vector<Seg>& segs,
                               const std::vector<std::vector<int32_t>>* tokens = nullptr) {
  auto m = std::make_unique<Meta>();
  for (const Seg& s : segs) {
    const int begin = static_cast<int>(m->pos.size());
    for (int i = 0; i < s.count; ++i) {
      m->ids.push_back(tokens ? (*tokens)[s.slot][s.start + i] : 0);
      m->pos.push_back(s.start + i);
      m->slot.push_back(s.slot);
      m->seg_begin.push_back(begin);
      m->seg_start.push_back(s.start);
      m->seg_count.push_back(s.count);
    }
  }
  m->d_ids = Upload(m->ids);
  m->d_pos = Upload(m->pos);
  m->d_slot = Upload(m->slot);
  m->d_begin = Upload(m->seg_begin);
  m->d_start = Upload(m->seg_start);
  m->d_count = Upload(m->seg_count);
  m->meta.ids = m->d_ids.as<int32_t>();
  m->meta.pos = m->d_pos.as<int32_t>();
  m->meta.slot = m->d_slot.as<int32_t>();
  m->meta.seg_begin = m->d_begin.as<int32_t>();
  m->meta.seg_start = m->d_start.as<int32_t>();
  m->meta.seg_count = m->d_count.as<int32_t>();
  m->meta.n = m->n();
  return m;
}

// Schedules over sequences of the given lengths: calls of several requests' chunks (the chunk
// length cycling through `chunks`), or one row per call (interleaving the sequences).
std::vector<std::vector<Seg>> ChunkedSchedule(const std::vector<int>& lengths,
                                              const std::vector<int>& chunks) {
  std::vector<std::vector<Seg>> calls;
  std::vector<int> done(lengths.size(), 0);
  for (size_t c = 0;; ++c) {
    std::vector<Seg> call;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int take = std::min(chunks[(c + s) % chunks.size()], lengths[s] - done[s]);
      if (take <= 0) continue;
      call.push_back({static_cast<int>(s), done[s], take});
      done[s] += take;
    }
    if (call.empty()) return calls;
    calls.push_back(call);
  }
}

std::vector<std::vector<Seg>> RowSchedule(const std::vector<int>& lengths) {
  std::vector<std::vector<Seg>> calls;
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  for (int p = 0; p < longest; ++p) {
    for (size_t s = 0; s < lengths.size(); ++s) {
      if (p < lengths[s]) calls.push_back({{static_cast<int>(s), p, 1}});
    }
  }
  return calls;
}

// ---- paged state fixtures ----

// An entry list: 2^shift entries a page, the pages of a sequence scattered in reverse order, a
// member offset of 4 floats.
struct ListPool {
  int seqs, capacity, width, shift = 3, pps;
  int64_t page_floats;
  std::vector<int32_t> pages;
  DeviceBuffer pool, d_pages;
  ListRef ref;
  ListPool(int seqs_, int capacity_, int width_) : seqs(seqs_), capacity(capacity_), width(width_) {
    pps = (capacity + (1 << shift) - 1) >> shift;
    page_floats = (int64_t{1} << shift) * width + 4;
    const int total = seqs * pps;
    for (int i = 0; i < total; ++i) pages.push_back(total - 1 - i);
    pool = DeviceBuffer(static_cast<size_t>(total * page_floats) * sizeof(float));
    d_pages = Upload(pages);
    ref.pool = pool.as<float>();
    ref.width = width;
    ref.page_floats = page_floats;
    ref.member_offset = 4;
    ref.rows_shift = shift;
    ref.pages = d_pages.as<int32_t>();
    ref.pages_stride = pps;
    ref.capacity = capacity;
  }
  int64_t Offset(int slot, int w) const {
    return pages[slot * pps + (w >> shift)] * page_floats + 4 + (w & ((1 << shift) - 1)) * width;
  }
  void Fill(float v, const Stream& s) {
    std::vector<float> h(pool.bytes() / sizeof(float), v);
    CopyToDeviceSync(pool.get(), h.data(), pool.bytes());
    s.Synchronize();
  }
  std::vector<float> Host(const Stream& s) const {
    return Download<float>(pool, pool.bytes() / sizeof(float), s);
  }
  // Uploads entries[slot] ([capacity, width]) into the pool.
  void Set(const std::vector<std::vector<float>>& entries) {
    std::vector<float> h(pool.bytes() / sizeof(float), 0.0f);
    for (int s = 0; s < seqs; ++s) {
      for (int w = 0; w < capacity; ++w) {
        std::copy_n(entries[s].data() + static_cast<int64_t>(w) * width, width,
                    h.data() + Offset(s, w));
      }
    }
    CopyToDeviceSync(pool.get(), h.data(), pool.bytes());
  }
};

// A ring of `cap` rows a sequence, one page each.
struct RingPool {
  std::vector<int32_t> pages;
  DeviceBuffer pool, d_pages;
  RingRef ref;
  RingPool(int seqs, int cap, int width) {
    for (int i = 0; i < seqs; ++i) pages.push_back(i);
    pool = DeviceBuffer(static_cast<size_t>(seqs) * cap * width * sizeof(float));
    d_pages = Upload(pages);
    ref.pool = pool.as<float>();
    ref.cap = cap;
    ref.width = width;
    ref.page_floats = int64_t{cap} * width;
    ref.member_offset = 0;
    ref.pages = d_pages.as<int32_t>();
    ref.pages_stride = 1;
  }
};

std::vector<float> InvFreq(int rope_dim) {
  std::vector<float> f(static_cast<size_t>(rope_dim / 2));
  for (int j = 0; j < rope_dim / 2; ++j) {
    f[j] = static_cast<float>(std::pow(10000.0, -2.0 * j / rope_dim));
  }
  return f;
}

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
}  // namespace dsinfer::backend::cuda
