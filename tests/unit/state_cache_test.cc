// State cache: the layout's bytes equal the model's state bytes at every length and state in cache
// pages computes what heap state does (both model families); the planner respects the budget;
// reservations are all-or-nothing and Free returns everything; copy-on-write sharing of the list
// pages (each page counted once, freed with its last holder in either order, a partly filled page
// never shared, a rollback past the shared rows unshares, and forks sharing pages compute exactly);
// the prefix index and the host tier's accounting (LRU within its byte budget).
#include "cache/state_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "cache/host_tier.h"
#include "cache/memory_planner.h"
#include "cache/prefix_index.h"
#include "model/deepseek_v4/state_layout.h"
#include "model/model_loader.h"
#include "model/paged_state.h"
#include "model_test_util.h"

namespace dsinfer::cache {
namespace {

// Both model families, through the family seam: a V4 and a V4.1 small model dir, and a V4.1 one
// with Engram layers (its token ring in the pages too).
class FamilyStateTest : public ::testing::TestWithParam<std::string> {
 protected:
  static std::unique_ptr<model::LanguageModel> Load(const std::string& family, int threads) {
    const std::string dir =
        family == "V4" ? testing::SmallModelDir(model::deepseek_v4::WeightFormat::kF32, "state_v4")
        : family == "V41" ? testing::SmallV41ModelDir("state_v41")
                          : testing::SmallV41EngramModelDir("state_v41_engram");
    auto m = model::LoadLanguageModel(dir, {threads});
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }
  // The logits of each chunk's every row.
  static std::vector<float> Forward(model::LanguageModel& m,
                                    std::vector<model::ModelChunk> chunks) {
    for (auto& ch : chunks) ch.logits_tail = static_cast<int64_t>(ch.ids.size());
    auto out = m.Forward(chunks, false);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->logits : std::vector<float>();
  }
};

TEST_P(FamilyStateTest, LayoutBytesMatchTheModelStateAtEveryLength) {
  auto m = Load(GetParam(), 1);
  ASSERT_NE(m, nullptr);
  for (int slack : {0, 4}) {
    const auto layout = m->StateLayoutFor(slack);
    model::HeapStatePages pages(layout);
    auto state = m->NewSequence(slack, layout, &pages);
    EXPECT_EQ(layout.ExactBytes(0), static_cast<int64_t>(state->bytes()));
    std::mt19937 rng(5);
    int64_t length = 0;
    for (int chunk : {1, 3, 12, 1, 20, 7, 30}) {
      const std::vector<int32_t> ids = testing::RandomIds(chunk, static_cast<uint32_t>(rng()));
      ASSERT_TRUE(m->Forward({{state.get(), ids, 1}}, false).ok());
      length += chunk;
      EXPECT_EQ(layout.ExactBytes(length), static_cast<int64_t>(state->bytes()))
          << "length " << length;
    }
  }
}

TEST(MemoryPlannerTest, SplitsTheBudget) {
  const auto layout = model::deepseek_v4::DeepseekV4StateLayout(testing::SmallConfig(), 0);
  EXPECT_GT(layout.FixedBytes(), 0);
  EXPECT_GT(layout.BytesPerToken(), 0);
  PlanOptions o;
  o.budget_bytes = 64 << 20;
  o.max_sequences = 8;
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->max_sequences, 8);
  EXPECT_LE(plan->planned_bytes, o.budget_bytes);
  EXPECT_GT(plan->token_capacity, 10000);
  o.budget_bytes = 1000;
  EXPECT_EQ(PlanMemory(layout, o).status().code(), StatusCode::kResourceExhausted);
}

// Growing pools page by whole 128-token spans (the largest power of two of rows that fits), so
// every 128-token boundary of a power-of-two rate is a page boundary; rings are one page.
TEST(MemoryPlannerTest, GrowingPagesCoverAtMost128Tokens) {
  const auto layout = model::deepseek_v4::DeepseekV4StateLayout(testing::SmallConfig(), 0);
  PlanOptions o;
  o.budget_bytes = 64 << 20;
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  int growing = 0;
  for (const PoolPlan& p : plan->pools) {
    if (p.component.ring()) {
      EXPECT_EQ(p.rows_per_page, p.component.ring_rows) << p.component.name;
      continue;
    }
    ++growing;
    const int64_t tokens = p.rows_per_page * p.component.tokens_per_row;
    EXPECT_LE(tokens, 128) << p.component.name;
    EXPECT_EQ(p.rows_per_page & (p.rows_per_page - 1), 0) << p.component.name;
    const int64_t rate = p.component.tokens_per_row;
    if ((rate & (rate - 1)) == 0 && rate <= 128) {
      EXPECT_EQ(tokens, 128) << p.component.name;
    }
  }
  EXPECT_GT(growing, 0);
  StateComponent rate3;
  rate3.tokens_per_row = 3;
  EXPECT_EQ(GrowingRowsPerPage(rate3, o), 32);  // 42 rows would fit: the power of two below
  rate3.tokens_per_row = 256;
  EXPECT_EQ(GrowingRowsPerPage(rate3, o), 1);  // a row wider than a page's tokens: one row
  o.rows_per_page = 5;
  EXPECT_EQ(GrowingRowsPerPage(rate3, o), 5);  // the explicit override
}

TEST(StateCacheTest, ReserveIsAllOrNothingAndFreeReturnsEverything) {
  const auto layout = model::deepseek_v4::DeepseekV4StateLayout(testing::SmallConfig(), 0);
  PlanOptions o;
  o.max_sequences = 2;
  o.typical_length = 64;
  o.budget_bytes = 2 * (layout.FixedBytes() + static_cast<int64_t>(layout.BytesPerToken() * 256));
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StateCache cache(*plan);
  EXPECT_TRUE(cache.Reserve(1, 10).ok());
  EXPECT_TRUE(cache.Reserve(1, 40).ok());
  EXPECT_EQ(cache.reserved_length(1), 40);
  EXPECT_TRUE(cache.Reserve(2, 16).ok());
  EXPECT_FALSE(cache.CanReserve(3, 1)) << "ring pools hold two requests";
  EXPECT_EQ(cache.Reserve(3, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(cache.Holds(3));
  const int64_t huge = plan->token_capacity * 2;
  const auto before = cache.Stats();
  EXPECT_FALSE(cache.Reserve(2, huge).ok());
  EXPECT_EQ(cache.Stats().bytes_used, before.bytes_used) << "a failed reserve changes nothing";
  EXPECT_FALSE(cache.FitsAlone(huge));
  EXPECT_TRUE(cache.FitsAlone(64));
  EXPECT_EQ(before.requests, 2);
  cache.Free(1);
  cache.Free(2);
  cache.Free(2);
  const auto after = cache.Stats();
  EXPECT_EQ(after.bytes_used, 0);
  EXPECT_EQ(after.requests, 0);
  for (const auto& pool : after.pools) EXPECT_EQ(pool.pages_used, 0) << pool.name;
}

// A plan by hand: a window ring (one 4-row page per request, 4 pages) and a compressed list and
// an index-key list of one row per 4 tokens, 2 rows (8 tokens) per page, `list_pages` pages each.
MemoryPlan SharingPlan(int64_t list_pages) {
  const auto component = [](const char* name, StateKind kind, int64_t ring_rows) {
    StateComponent c;
    c.name = name;
    c.kind = kind;
    c.bytes_per_row = 16;
    c.ring_rows = ring_rows;
    c.tokens_per_row = ring_rows > 0 ? 1 : 4;
    c.members.push_back({0, 0, 4, 0});
    return c;
  };
  MemoryPlan plan;
  plan.pools.push_back({component("window", StateKind::kWindow, 4), 4, 4});
  plan.pools.push_back({component("compressed", StateKind::kCompressed, 0), 2, list_pages});
  plan.pools.push_back({component("index", StateKind::kIndexKeys, 0), 2, list_pages});
  return plan;
}

TEST(StateCacheSharingTest, SharedPagesCountOnceAndLeaveWithTheLastHolder) {
  for (bool parent_first : {true, false}) {
    StateCache cache(SharingPlan(8));
    ASSERT_TRUE(cache.Reserve(1, 30).ok());  // 7 list rows: 4 pages, the last half full
    EXPECT_EQ(cache.SharedPages(0, 30), 0) << "a ring is never shared";
    EXPECT_EQ(cache.SharedPages(1, 30), 3) << "whole pages below 7 rows";
    EXPECT_EQ(cache.SharedPages(1, 32), 4);
    EXPECT_EQ(cache.SharedPages(1, 0), 0);
    // Admission counts the pages not shared: 4 free list pages, a full copy needs 4, a copy
    // sharing 3 needs 1.
    ASSERT_TRUE(cache.Reserve(9, 8).ok());  // another request: 1 page per list, 3 left free
    EXPECT_FALSE(cache.CanReserve(2, 30));
    EXPECT_TRUE(cache.CanReserve(2, 30, 1, 30));
    EXPECT_TRUE(cache.CanReserve(2, 30, 1, 8));   // shares 1, needs 3
    EXPECT_FALSE(cache.CanReserve(2, 30, 1, 7));  // shares none
    cache.Share(1, 2, 30);
    ASSERT_TRUE(cache.Reserve(2, 30).ok());
    for (size_t pool : {size_t{1}, size_t{2}}) {
      const auto& a = cache.PageTable(1, pool);
      const auto& b = cache.PageTable(2, pool);
      ASSERT_EQ(a.size(), 4u);
      ASSERT_EQ(b.size(), 4u);
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(a[k], b[k]) << "page " << k;
        EXPECT_TRUE(cache.IsShared(1, pool, k));
      }
      EXPECT_NE(a[3], b[3]) << "the partly filled last page is each one's own";
      EXPECT_FALSE(cache.IsShared(2, pool, 3));
    }
    EXPECT_NE(cache.PageTable(1, 0), cache.PageTable(2, 0)) << "rings are copied";
    const CacheStats st = cache.Stats();
    EXPECT_EQ(st.pools[1].pages_used, 4 + 1 + 1);
    EXPECT_EQ(st.pools[1].pages_shared, 3);
    EXPECT_EQ(st.pools[1].page_refs, 4 + 4 + 1);
    EXPECT_EQ(st.pools[0].pages_shared, 0);
    EXPECT_EQ(st.bytes_referenced, cache.BytesOf(1) + cache.BytesOf(2) + cache.BytesOf(9));
    EXPECT_EQ(st.bytes_used, cache.BytesOf(std::vector<uint64_t>{1, 2, 9}));
    EXPECT_EQ(st.bytes_referenced - st.bytes_used, 2 * 3 * 32) << "3 pages of 32 bytes per list";
    EXPECT_EQ(cache.BytesOf(std::vector<uint64_t>{1, 2}), cache.BytesOf(1) + 4 * 16 + 2 * 32);
    // Either holder may go first: the other keeps every page it holds.
    const uint64_t first = parent_first ? 1 : 2, second = parent_first ? 2 : 1;
    const std::vector<int32_t> kept = cache.PageTable(second, 1);
    cache.Free(first);
    const CacheStats half = cache.Stats();
    EXPECT_EQ(half.pools[1].pages_shared, 0);
    EXPECT_EQ(half.pools[1].pages_used, 4 + 1);
    EXPECT_EQ(half.bytes_used, half.bytes_referenced);
    EXPECT_EQ(cache.PageTable(second, 1), kept);
    // A page freed with its last holder is free again: the freed partial page is reused first.
    ASSERT_TRUE(cache.Reserve(3, 8).ok());
    cache.Free(3);
    cache.Free(second);
    cache.Free(9);
    const CacheStats none = cache.Stats();
    EXPECT_EQ(none.bytes_used, 0);
    for (const auto& pool : none.pools) {
      EXPECT_EQ(pool.pages_used, 0) << pool.name;
      EXPECT_EQ(pool.page_refs, 0) << pool.name;
    }
  }
}

TEST(StateCacheSharingTest, ARollbackPastTheSharedRowsUnsharesTheirPages) {
  StateCache cache(SharingPlan(8));
  ASSERT_TRUE(cache.Reserve(1, 32).ok());  // 8 rows: 4 whole pages
  cache.Share(1, 2, 32);
  ASSERT_TRUE(cache.Reserve(2, 32).ok());
  EXPECT_EQ(cache.Stats().pools[1].pages_shared, 4);
  const std::vector<int32_t> parent = cache.PageTable(1, 1);
  // Nothing from 32 tokens on is shared: no copy.
  auto none = cache.Unshare(2, 32);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // Back to 20 tokens: rows 5.. are rewritten, in pages 2 and 3 of each list.
  auto copies = cache.Unshare(2, 20);
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  ASSERT_EQ(copies->size(), 4u);
  for (const PageCopy& c : *copies) {
    const auto& table = cache.PageTable(2, c.pool);
    EXPECT_TRUE(c.from == parent[2] || c.from == parent[3]);
    EXPECT_TRUE(c.to == table[2] || c.to == table[3]);
  }
  for (size_t pool : {size_t{1}, size_t{2}}) {
    EXPECT_TRUE(cache.IsShared(2, pool, 1));
    EXPECT_FALSE(cache.IsShared(2, pool, 2));
    EXPECT_FALSE(cache.IsShared(2, pool, 3));
  }
  EXPECT_EQ(cache.PageTable(1, 1), parent) << "the other holder keeps its pages";
  EXPECT_EQ(cache.Stats().pools[1].pages_shared, 2);
  EXPECT_EQ(cache.Stats().pools[1].pages_used, 6);
  // No free page for a copy: refused, nothing changed.
  ASSERT_TRUE(cache.Reserve(3, 8).ok());  // 1 page per list: 1 left
  ASSERT_TRUE(cache.Reserve(4, 8).ok());  // none left
  const CacheStats before = cache.Stats();
  EXPECT_EQ(cache.Unshare(1, 0).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.Stats().pools[1].pages_shared, before.pools[1].pages_shared);
  EXPECT_EQ(cache.Stats().bytes_used, before.bytes_used);
  cache.Free(4);
  cache.Free(3);
  auto rest = cache.Unshare(1, 0);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), 4u);
  EXPECT_EQ(cache.Stats().pools[1].pages_shared, 0);
  EXPECT_EQ(cache.Stats().bytes_used, cache.Stats().bytes_referenced);
}

// The model's state really lives in the pools: two requests whose rows are pages of one cache
// (interleaved page ids) compute exactly what private heap state computes, and a fork copied into
// its own pages continues identically.
TEST_P(FamilyStateTest, ModelStateInCachePagesIsExact) {
  auto loaded = Load(GetParam(), 2);
  ASSERT_NE(loaded, nullptr);
  model::LanguageModel& model = *loaded;
  const int64_t V = model.info().vocab_size;
  const auto layout = model.StateLayoutFor(0);
  PlanOptions o;
  o.max_sequences = 4;
  o.rows_per_page = 2;  // many pages per request
  o.typical_length = 128;
  o.budget_bytes = 4 * (layout.FixedBytes() + static_cast<int64_t>(layout.BytesPerToken() * 1024));
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StateCache cache(*plan);

  const std::vector<int32_t> a = testing::RandomIds(70, 3), b = testing::RandomIds(45, 4);
  model::HeapStatePages heap_pages_a(layout), heap_pages_b(layout);
  auto heap_a = model.NewSequence(0, layout, &heap_pages_a);
  auto heap_b = model.NewSequence(0, layout, &heap_pages_b);
  const auto ref_a = Forward(model, {{heap_a.get(), a}});
  const auto ref_b = Forward(model, {{heap_b.get(), b}});

  std::unique_ptr<model::ModelSequence> sa, sb;
  std::vector<float> got_a, got_b;
  for (size_t at = 0; at < a.size(); at += 9) {  // interleave growth so the pages interleave
    const size_t na = std::min<size_t>(9, a.size() - at),
                 nb = at < b.size() ? std::min<size_t>(9, b.size() - at) : 0;
    ASSERT_TRUE(cache.Reserve(1, static_cast<int64_t>(at + na)).ok());
    if (!sa) sa = model.NewSequence(0, layout, cache.Pages(1));
    std::vector<model::ModelChunk> chunks = {
        {sa.get(), std::vector<int32_t>(a.begin() + at, a.begin() + at + na)}};
    if (nb > 0) {
      ASSERT_TRUE(cache.Reserve(2, static_cast<int64_t>(at + nb)).ok());
      if (!sb) sb = model.NewSequence(0, layout, cache.Pages(2));
      chunks.push_back({sb.get(), std::vector<int32_t>(b.begin() + at, b.begin() + at + nb)});
    }
    const auto out = Forward(model, chunks);
    got_a.insert(got_a.end(), out.begin(), out.begin() + static_cast<int64_t>(na) * V);
    got_b.insert(got_b.end(), out.begin() + static_cast<int64_t>(na) * V, out.end());
  }
  EXPECT_EQ(got_a, ref_a);
  EXPECT_EQ(got_b, ref_b);
  EXPECT_GT(cache.Stats().bytes_used, 0);

  // Fork request 2 into request 3 and continue both with the same token: identical logits.
  ASSERT_TRUE(cache.Reserve(3, static_cast<int64_t>(b.size())).ok());
  auto sc = model.NewSequence(0, layout, cache.Pages(3));
  sc->CopyFrom(*sb);
  ASSERT_TRUE(cache.Reserve(2, static_cast<int64_t>(b.size()) + 1).ok());
  ASSERT_TRUE(cache.Reserve(3, static_cast<int64_t>(b.size()) + 1).ok());
  const auto o2 = Forward(model, {{sb.get(), {17}}});
  const auto o3 = Forward(model, {{sc.get(), {17}}});
  const auto oh = Forward(model, {{heap_b.get(), {17}}});
  EXPECT_EQ(o2, oh);
  EXPECT_EQ(o3, oh);
}

// Copy-on-write with the model: a request's state is copied into a second request that shares
// its whole list pages; both go on (the copy after a rollback past the shared rows, which
// unshares the pages it rewrites, as the runners do) and compute exactly what private copies
// compute, and the shared pages stay as they were.
TEST_P(FamilyStateTest, StatesSharingPagesComputeExactly) {
  auto loaded = Load(GetParam(), 2);
  ASSERT_NE(loaded, nullptr);
  model::LanguageModel& model = *loaded;
  const int slack = 4;
  const auto layout = model.StateLayoutFor(slack);
  PlanOptions o;
  o.max_sequences = 4;
  o.rows_per_page = 2;
  o.typical_length = 128;
  o.budget_bytes = 4 * (layout.FixedBytes() + static_cast<int64_t>(layout.BytesPerToken() * 1024));
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StateCache cache(*plan);

  const std::vector<int32_t> prompt = testing::RandomIds(72, 8);
  model::HeapStatePages heap1(layout), heap2(layout);
  auto h1 = model.NewSequence(slack, layout, &heap1);
  auto h2 = model.NewSequence(slack, layout, &heap2);
  Forward(model, {{h1.get(), prompt}});
  h2->CopyFrom(*h1);
  ASSERT_TRUE(cache.Reserve(1, 72).ok());
  auto s1 = model.NewSequence(slack, layout, cache.Pages(1));
  Forward(model, {{s1.get(), prompt}});

  cache.Share(1, 2, 72);
  ASSERT_TRUE(cache.Reserve(2, 72).ok());
  auto s2 = model.NewSequence(slack, layout, cache.Pages(2));
  s2->CopyFrom(*s1);
  int64_t shared = 0;
  for (const auto& pool : cache.Stats().pools) shared += pool.pages_shared;
  ASSERT_GT(shared, 0) << "the small model has compressed lists of whole pages at 72 tokens";
  // The shared pages' bytes now.
  const auto shared_pages = [&] {
    std::map<std::pair<size_t, int32_t>, std::vector<float>> pages;
    for (size_t p = 0; p < plan->pools.size(); ++p) {
      const auto& table = cache.PageTable(1, p);
      for (size_t k = 0; k < table.size(); ++k) {
        if (!cache.IsShared(1, p, static_cast<int64_t>(k))) continue;
        const float* d = cache.PageData(p, table[k]);
        pages[{p, table[k]}].assign(d, d + plan->pools[p].page_bytes() / 4);
      }
    }
    return pages;
  };
  const auto before = shared_pages();

  // The copy rolls back 4 tokens (past the shared rows) and goes on with other tokens.
  auto copies = cache.Unshare(2, 68);
  ASSERT_TRUE(copies.ok()) << copies.status().ToString();
  EXPECT_FALSE(copies->empty()) << "72 tokens fill a list page that 68 do not";
  for (const PageCopy& c : *copies) {
    std::memcpy(cache.PageData(c.pool, c.to), cache.PageData(c.pool, c.from),
                static_cast<size_t>(plan->pools[c.pool].page_bytes()));
  }
  ASSERT_TRUE(s2->Rollback(68).ok());
  ASSERT_TRUE(h2->Rollback(68).ok());
  const std::vector<int32_t> other = testing::RandomIds(20, 9), more = testing::RandomIds(9, 10);
  ASSERT_TRUE(cache.Reserve(2, 88).ok());
  EXPECT_EQ(Forward(model, {{s2.get(), other}}), Forward(model, {{h2.get(), other}}));
  ASSERT_TRUE(cache.Reserve(1, 81).ok());
  EXPECT_EQ(Forward(model, {{s1.get(), more}}), Forward(model, {{h1.get(), more}}));

  // The pages still shared are among those shared before, unchanged.
  const auto after = shared_pages();
  ASSERT_FALSE(after.empty());
  for (const auto& [page, data] : after) {
    ASSERT_TRUE(before.count(page));
    EXPECT_EQ(std::memcmp(data.data(), before.at(page).data(), data.size() * sizeof(float)), 0)
        << "pool " << page.first << " page " << page.second;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyStateTest, ::testing::Values("V4", "V41", "V41Engram"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace dsinfer::cache

namespace dsinfer::cache {
namespace {

TEST(PrefixIndexTest, LongestHeldPrefixWithinTheLimit) {
  std::vector<int32_t> t(400);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(i * 7 % 101);
  PrefixIndex index(42);
  EXPECT_FALSE(index.Lookup(t, 399).has_value());
  index.Insert(1, t, 128);
  index.Insert(2, t, 300);  // not block-aligned: a prompt's end
  index.Insert(3, t, 256);
  EXPECT_TRUE(index.Contains(t, 300));
  EXPECT_FALSE(index.Contains(t, 299));
  auto hit = index.Lookup(t, 399);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, 2u);
  EXPECT_EQ(hit->length, 300);
  hit = index.Lookup(t, 299);  // the limit excludes 300
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, 3u);
  // A different token inside the held prefix: only the shorter states match.
  auto u = t;
  u[200] += 1;
  hit = index.Lookup(u, 399);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, 1u);
  // A different token in a tail after the last whole block: compared in full.
  auto v = t;
  v[290] += 1;
  hit = index.Lookup(v, 399);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->id, 3u);
  // Another salt (another model or dialect) shares nothing.
  PrefixIndex other(43);
  other.Insert(9, t, 128);
  EXPECT_TRUE(other.Lookup(t, 399).has_value());
  EXPECT_FALSE(index.Contains(std::vector<int32_t>(t.begin(), t.begin() + 100), 100));
}

TEST(PrefixIndexTest, LeastRecentlyUsedSkipsTheKeptOne) {
  std::vector<int32_t> t(300, 5);
  PrefixIndex index;
  index.Insert(1, t, 128);
  index.Insert(2, t, 256);
  index.Insert(3, t, 299);
  EXPECT_EQ(index.LeastRecentlyUsed(), 1u);
  ASSERT_TRUE(index.Lookup(t, 130).has_value());  // uses 1
  EXPECT_EQ(index.LeastRecentlyUsed(), 2u);
  EXPECT_EQ(index.LeastRecentlyUsed(2), 3u);
  index.Erase(2);
  EXPECT_FALSE(index.Contains(t, 256));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.Ids(), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(index.Lookup(t, 299)->id, 3u);
  EXPECT_FALSE(PrefixIndex().LeastRecentlyUsed().has_value());
}

TEST(HostTierTest, LeastRecentlyUsedLeaveFirstWithinTheBudget) {
  HostTier tier(100);
  EXPECT_EQ(tier.Insert(1, 40), std::vector<uint64_t>{});
  EXPECT_EQ(tier.Insert(2, 30), std::vector<uint64_t>{});
  EXPECT_EQ(tier.Insert(3, 30), std::vector<uint64_t>{});
  EXPECT_EQ(tier.bytes_used(), 100);
  EXPECT_EQ(tier.Ids(), (std::vector<uint64_t>{1, 2, 3}));
  // 1 used again: 2 is now the oldest, and 2 and 3 make room for 50 bytes.
  tier.Touch(1);
  EXPECT_EQ(tier.Ids(), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_EQ(tier.Insert(4, 50), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(tier.Ids(), (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(tier.bytes_used(), 90);
  EXPECT_FALSE(tier.Contains(2));
  EXPECT_EQ(tier.BytesOf(4), 50);
  EXPECT_EQ(tier.BytesOf(2), 0);
  // The kept one is skipped: 4 goes instead of the older 1.
  EXPECT_EQ(tier.Insert(5, 20, /*keep=*/1), std::vector<uint64_t>{4});
  EXPECT_EQ(tier.Ids(), (std::vector<uint64_t>{1, 5}));
  EXPECT_EQ(tier.bytes_used(), 60);
  tier.Erase(1);
  tier.Erase(1);  // no-op
  EXPECT_EQ(tier.bytes_used(), 20);
  EXPECT_EQ(tier.size(), 1u);
}

TEST(HostTierTest, WhatCannotFitChangesNothing) {
  HostTier tier(100);
  ASSERT_TRUE(tier.Insert(1, 60).has_value());
  ASSERT_TRUE(tier.Insert(2, 30).has_value());
  // Larger than the budget.
  EXPECT_FALSE(tier.Insert(3, 101).has_value());
  // Fits only by evicting the kept state: nothing is evicted.
  EXPECT_FALSE(tier.Insert(3, 50, /*keep=*/1).has_value());
  EXPECT_EQ(tier.Ids(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(tier.bytes_used(), 90);
  EXPECT_FALSE(tier.Contains(3));
  // Exactly the budget, once the others go.
  EXPECT_EQ(tier.Insert(3, 100), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(tier.bytes_used(), 100);
  EXPECT_EQ(HostTier(0).Insert(1, 1), std::nullopt);
}

}  // namespace
}  // namespace dsinfer::cache
