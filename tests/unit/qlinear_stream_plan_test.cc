// The streamed decode linear's work plan (backend/cuda/qlinear_stream_plan.h), walked on the CPU
// exactly as the kernel walks it: every valid (unit, slice, chunk) is computed once by one warp,
// invalid units never, each slice's chunks cover its k pairs in order, the copy issuer's sequence
// (FirstChunk / NextChunk, `stages` ahead) is the consumer's sequence, and the launch shapes of
// the V4-Flash decode matrices get the planned ring depths and rounds.
#include "backend/cuda/qlinear_stream_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace dsinfer::backend::cuda::qstream {
namespace {

struct Walk {
  // (unit, slice) -> the warp-global id that computed it and the chunk pair ranges seen.
  std::map<std::pair<int64_t, int>, int> owner;
  std::map<std::pair<int64_t, int>, std::vector<std::pair<int, int>>> chunks;
  int64_t total_chunks = 0;
  int max_rounds = 0;
};

// The kernel's consumer loop for every block and warp, with the issuer's cursor run `stages`
// ahead and checked to name the same chunk when the consumer takes it.
Walk WalkPlan(const Plan& p, int64_t units, const std::vector<bool>& valid_units) {
  auto valid = [&](int64_t u) { return valid_units[static_cast<size_t>(u)]; };
  Walk w;
  for (int b = 0; b < p.grid; ++b) {
    const int rounds = RoundsOf(p, units, b);
    w.max_rounds = std::max(w.max_rounds, rounds);
    for (int warp = 0; warp < p.warps; ++warp) {
      // Issuer: the chunks in issue order.
      std::vector<std::tuple<int, int, int>> issued;
      for (PlanCursor c = FirstChunk(p, units, b, warp, rounds, valid); !c.done;
           NextChunk(p, units, b, warp, c, rounds, valid))
        issued.emplace_back(c.round, c.item(p, warp), c.chunk);
      // Consumer: the nested loops the kernel's item loop amounts to.
      size_t n = 0;
      int last_round = -1;
      for (int r = 0; r < rounds; ++r) {
        for (int i = warp; i < ItemsPerRound(p); i += p.warps) {
          const int64_t u = UnitOf(p, b, r, i);
          if (u >= units || !valid(u)) continue;
          const int s = i % p.slices;
          EXPECT_TRUE(w.owner.emplace(std::make_pair(u, s), b * p.warps + warp).second)
              << "unit " << u << " slice " << s << " computed twice";
          for (int ch = 0; ch < ChunksOfSlice(p, s); ++ch, ++n) {
            EXPECT_LT(n, issued.size());
            if (n >= issued.size()) return w;
            EXPECT_EQ(issued[n], std::make_tuple(r, i, ch)) << "block " << b << " warp " << warp;
            const int first = ch * p.chunk_pairs;
            const int count = std::min(p.chunk_pairs, PairsOfSlice(p, s) - first);
            EXPECT_GT(count, 0);
            w.chunks[{u, s}].emplace_back(first, count);
          }
          EXPECT_GE(r, last_round);
          last_round = r;
        }
      }
      EXPECT_EQ(n, issued.size()) << "the issuer names chunks the consumer never takes";
      w.total_chunks += static_cast<int64_t>(n);
    }
  }
  return w;
}

void ExpectCovers(const Plan& p, int64_t units, const std::vector<bool>& valid_units,
                  const Walk& w) {
  int64_t want_chunks = 0;
  for (int64_t u = 0; u < units; ++u) {
    for (int s = 0; s < p.slices; ++s) {
      const auto key = std::make_pair(u, s);
      if (!valid_units[static_cast<size_t>(u)]) {
        EXPECT_EQ(w.owner.count(key), 0u) << "invalid unit " << u << " computed";
        continue;
      }
      ASSERT_EQ(w.owner.count(key), 1u) << "unit " << u << " slice " << s << " never computed";
      // The chunks of a slice: consecutive pair ranges from 0 to the slice's pairs.
      int next = 0;
      for (const auto& [first, count] : w.chunks.at(key)) {
        EXPECT_EQ(first, next);
        next = first + count;
      }
      EXPECT_EQ(next, PairsOfSlice(p, s));
      want_chunks += ChunksOfSlice(p, s);
    }
  }
  EXPECT_EQ(w.total_chunks, want_chunks);
}

TEST(QLinearStreamPlanTest, EveryValidSliceOnceInIssueOrder) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    PlanInput in;
    in.warps = 1 << (rng() % 4);                   // 1..8
    in.slices = 1 + static_cast<int>(rng() % 17);  // 1..17 (odd counts: idle warps)
    in.slice_pairs = (rng() % 2 == 0) ? 4 : 8;
    in.chunk_pairs = in.slice_pairs == 8 && rng() % 2 ? 4 : (rng() % 2 ? 2 : in.slice_pairs);
    in.last_pairs = 1 + static_cast<int>(rng() % in.slice_pairs);
    in.stage_bytes = 4096;
    in.ring_budget = static_cast<int64_t>(rng() % 200000);
    Plan p = MakePlan(in);
    const int64_t units = static_cast<int64_t>(rng() % 70);
    p.grid = 1 + static_cast<int>(rng() % 40);
    std::vector<bool> valid(static_cast<size_t>(units));
    const int density = static_cast<int>(rng() % 4);  // 0: all valid, else ~1/density invalid
    for (auto&& v : valid) v = density == 0 || rng() % (density + 1) != 0;
    SCOPED_TRACE(testing::Message()
                 << "trial " << trial << " W=" << p.warps << " S=" << p.slices
                 << " UB=" << p.units_per_round << " G=" << p.grid << " units=" << units);
    EXPECT_GE(p.stages, in.min_stages);
    EXPECT_LE(p.stages, in.max_stages);
    EXPECT_LE(ItemsPerRound(p), std::max(p.warps, p.slices));
    const Walk w = WalkPlan(p, units, valid);
    ExpectCovers(p, units, valid, w);
  }
}

// The decode launches of V4-Flash (hidden 4096, moe_intermediate 2048, q_lora 1024, o_lora 1024 x
// 8 groups): slices, ring depth and rounds per block as the launcher plans them (8 warps, a
// 112 KB block budget less the staged rows and the partials).
TEST(QLinearStreamPlanTest, FlashDecodeShapes) {
  struct Shape {
    const char* name;
    bool fp4, dual;
    int64_t n, k, slots, staged;
    int want_stages, want_ub;
  };
  const Shape shapes[] = {
      {"experts w1+w3 (FP4)", true, true, 2048, 4096, 6, 0, 2, 1},
      {"experts w2 (FP4)", true, false, 4096, 2048, 6, 0, 6, 1},
      {"wq_b (FP8)", false, false, 32768, 1024, 0, 0, 3, 4},
      {"wo_b (FP8, x staged)", false, false, 4096, 8192, 0, 8192 * 2 + 64 * 4, 2, 1},
      {"shared w1+w3 (FP8)", false, true, 2048, 4096, 0, 0, 2, 1},
  };
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(sh.name);
    const int kd = sh.dual ? 2 : 1, kp = sh.fp4 ? 4 : (sh.dual ? 4 : 8);
    PlanInput in;
    in.warps = 8;
    in.slices = static_cast<int>((sh.k + 64 * kp - 1) / (64 * kp));
    in.slice_pairs = kp;
    in.last_pairs = static_cast<int>((sh.k - (in.slices - 1) * 64 * kp) / 64);
    in.chunk_pairs = sh.fp4 ? 4 : (sh.dual ? 2 : 4);
    in.stage_bytes =
        kd * in.chunk_pairs * (sh.fp4 ? 512 : 1024) + (sh.fp4 ? kd * in.chunk_pairs * 32 : 0);
    const int items = UnitsPerRound(in.slices, in.warps) * in.slices;
    in.ring_budget = 112 * 1024 - MakeLayout(sh.staged, items, kd, in.warps, 0, 0).ring_off;
    Plan p = MakePlan(in);
    EXPECT_EQ(p.units_per_round, sh.want_ub);
    EXPECT_EQ(p.stages, sh.want_stages);
    // Shared memory of the block stays within two blocks per SM (228 KB less 1 KB reserved each).
    const Layout lay = MakeLayout(sh.staged, items, kd, p.warps, p.stages, in.stage_bytes);
    EXPECT_LE(lay.bytes, 113 * 1024);
    const int64_t units = (sh.n / 16) * std::max<int64_t>(sh.slots, 1);
    p.grid = static_cast<int>(
        std::min<int64_t>((units + p.units_per_round - 1) / p.units_per_round, 132 * 2));
    std::vector<bool> valid(static_cast<size_t>(units), true);
    const Walk w = WalkPlan(p, units, valid);
    ExpectCovers(p, units, valid, w);
    // Balance: no block runs more than one round beyond the average.
    const double avg = static_cast<double>(units) / p.units_per_round / p.grid;
    EXPECT_LE(w.max_rounds, static_cast<int>(avg) + 1);
  }
}

// The shared-memory layout over many launch shapes: the partials 16-byte aligned after the
// staged rows, the ring 128-byte aligned after them (the bulk copies' destinations), the
// mbarriers 8-byte aligned after it, no region overlapping the next, and every staged-row size
// the launcher accepts (<= 64 KB) leaving room for a two-stage ring under the 227 KB limit.
TEST(QLinearStreamPlanTest, SharedMemoryLayout) {
  for (const bool fp4 : {false, true}) {
    for (const int kd : {1, 2}) {
      const int kp = fp4 || kd == 2 ? 4 : 8, cp = fp4 ? 4 : (kd == 2 ? 2 : 4);
      const int64_t stage = kd * cp * (fp4 ? 512 : 1024) + (fp4 ? kd * cp * 32 : 0);
      for (int64_t k = 64; k <= 8192; k += 64) {
        const int slices = static_cast<int>((k + 64 * kp - 1) / (64 * kp));
        const int items = UnitsPerRound(slices, 8) * slices;
        for (const int64_t staged :
             {int64_t{0}, int64_t{4160}, int64_t{16 * 1024 + 256}, int64_t{65536}}) {
          SCOPED_TRACE(testing::Message()
                       << "fp4 " << fp4 << " kd " << kd << " k " << k << " staged " << staged);
          PlanInput in;
          in.warps = 8;
          in.slices = slices;
          in.slice_pairs = kp;
          in.last_pairs = static_cast<int>((k - (slices - 1) * 64 * kp) / 64);
          in.chunk_pairs = cp;
          in.stage_bytes = stage;
          in.ring_budget = 112 * 1024 - MakeLayout(staged, items, kd, 8, 0, 0).ring_off;
          const Plan p = MakePlan(in);
          const Layout l = MakeLayout(staged, items, kd, p.warps, p.stages, stage);
          EXPECT_EQ(l.red_off % 16, 0);
          EXPECT_GE(l.red_off, staged);
          EXPECT_EQ(l.ring_off % 128, 0);
          EXPECT_GE(l.ring_off, l.red_off + PartialBytes(items, kd));
          EXPECT_EQ(stage % 128, 0);  // every stage of the ring starts 128-byte aligned
          EXPECT_EQ(l.bar_off % 8, 0);
          EXPECT_EQ(l.bar_off, l.ring_off + int64_t{p.warps} * p.stages * stage);
          EXPECT_EQ(l.bytes, l.bar_off + int64_t{p.warps} * p.stages * 8);
          EXPECT_GE(p.stages, 2);
          EXPECT_LE(l.bytes, 227 * 1024);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsinfer::backend::cuda::qstream
