// Scheduler with a fake executor: the "model" state of a sequence is the list of tokens it has
// consumed, and the next token is a hash of that list. So outputs depend only on each sequence's
// tokens, and any schedule (budgets, memory pressure, preemption) must give the same outputs.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace dsinfer::scheduler {
namespace {

// One ring component (fixed per sequence) and one growing component, 1 row per token, pages of 4.
cache::MemoryPlan Plan(int max_sequences, int64_t token_pages) {
  cache::MemoryPlan plan;
  cache::StateComponent ring{"ring", cache::StateKind::kWindow, 8, 4, 1, {}};
  cache::StateComponent grow{"grow", cache::StateKind::kCompressed, 8, 0, 1, {}};
  plan.pools.push_back({ring, 4, max_sequences});
  plan.pools.push_back({grow, 4, token_pages});
  plan.max_sequences = max_sequences;
  plan.token_capacity = token_pages * 4;
  return plan;
}

struct Spec {
  std::vector<int32_t> prompt;
  int max_new = 0;
  int priority = 0;
  int arrive_step = 0;
};

struct Trace {
  std::map<SeqId, std::vector<int32_t>> outputs;
  int64_t preemptions = 0;
  SchedulerStats stats;
  int64_t steps = 0;
  std::vector<SeqId> finish_order;
};

// Drives the scheduler like the engine does, checking its invariants on every step.
// With `keep`, a preempted sequence's state is kept (outside the cache, as the engine's host tier
// would) and restored at its readmission through the hooks.
Trace Drive(const std::vector<Spec>& specs, SchedulerConfig config, cache::MemoryPlan plan,
            uint32_t budget_seed = 0, bool keep = false) {
  cache::StateCache cache(plan);
  Scheduler sched(config, &cache);
  std::map<SeqId, std::vector<int32_t>> consumed;  // the fake model state
  std::map<SeqId, std::vector<int32_t>> kept;      // preempted sequences' states
  SeqId probed = 0;
  if (keep) {
    SchedulerHooks hooks;
    hooks.preempt = [&](SeqId id, const std::vector<int32_t>& tokens, int64_t computed) {
      EXPECT_EQ(consumed[id], std::vector<int32_t>(tokens.begin(), tokens.begin() + computed));
      kept[id] = consumed[id];
    };
    hooks.probe = [&](SeqId id, const std::vector<int32_t>& tokens, int64_t max_length) {
      auto it = kept.find(id);
      probed = 0;
      if (it == kept.end() || static_cast<int64_t>(it->second.size()) > max_length)
        return int64_t{0};
      EXPECT_TRUE(std::equal(it->second.begin(), it->second.end(), tokens.begin()));
      probed = id;
      return static_cast<int64_t>(it->second.size());
    };
    hooks.restore = [&](SeqId id, int64_t length) {
      EXPECT_EQ(probed, id);
      EXPECT_EQ(static_cast<int64_t>(kept.at(id).size()), length);
      consumed[id] = kept.at(id);
      kept.erase(id);
    };
    hooks.unprobe = [&] { probed = 0; };
    sched.set_hooks(std::move(hooks));
  }
  std::map<SeqId, int> generated;
  Trace run;
  std::mt19937 rng(budget_seed);
  size_t added = 0;
  for (int step = 0; step < 100000; ++step) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].arrive_step == step) {
        sched.Add(i + 1, specs[i].prompt, specs[i].priority);
        ++added;
      }
    }
    if (added == specs.size() && sched.idle()) break;
    if (budget_seed) sched.set_max_batch_tokens(1 + rng() % 12);
    BatchPlan p = sched.Schedule();
    for (SeqId id : p.preempted) consumed.erase(id);
    EXPECT_LE(p.num_tokens, sched.config().max_batch_tokens);
    std::vector<int32_t> next;
    std::map<SeqId, int> seen;
    for (const auto& ch : p.chunks) {
      EXPECT_EQ(++seen[ch.id], 1) << "a sequence twice in one step";
      auto& state = consumed[ch.id];
      EXPECT_EQ(static_cast<int64_t>(state.size()), ch.start) << "chunks must be contiguous";
      EXPECT_GE(cache.reserved_length(ch.id), ch.start + ch.count) << "state reserved first";
      const auto& toks = sched.tokens(ch.id);
      state.insert(state.end(), toks.begin() + ch.start, toks.begin() + ch.start + ch.count);
      if (ch.samples) {
        uint32_t h = 2166136261u;
        for (int32_t t : state) h = (h ^ static_cast<uint32_t>(t)) * 16777619u;
        next.push_back(static_cast<int32_t>(h % 1000));
      }
    }
    sched.Commit(p, next);
    size_t k = 0;
    for (const auto& ch : p.chunks) {
      if (!ch.samples) continue;
      run.outputs[ch.id].push_back(next[k++]);
      if (++generated[ch.id] == specs[ch.id - 1].max_new) {
        sched.Remove(ch.id);
        consumed.erase(ch.id);
        run.finish_order.push_back(ch.id);
      }
    }
    run.steps = step;
  }
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(cache.Stats().bytes_used, 0);
  run.preemptions = sched.Stats().preemptions;
  run.stats = sched.Stats();
  return run;
}

std::vector<Spec> RandomSpecs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Spec> specs(n);
  for (auto& s : specs) {
    s.prompt.resize(1 + rng() % 30);
    for (auto& t : s.prompt) t = static_cast<int32_t>(rng() % 1000);
    s.max_new = 1 + static_cast<int>(rng() % 20);
    s.arrive_step = static_cast<int>(rng() % 10);
  }
  return specs;
}

TEST(SchedulerTest, OutputsDoNotDependOnBudgetsOrMemoryPressure) {
  const auto specs = RandomSpecs(12, 1);
  SchedulerConfig roomy{64, 16, 32};
  const Trace base = Drive(specs, roomy, Plan(16, 1000));
  EXPECT_EQ(base.preemptions, 0);
  ASSERT_EQ(base.outputs.size(), specs.size());
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    EXPECT_EQ(Drive(specs, roomy, Plan(16, 1000), seed).outputs, base.outputs) << "random budgets " << seed;
  }
  // 13 pages of 4 tokens for everything: the longest sequence (50 tokens) fits alone, but
  // several at once do not, so sequences get preempted and recompute.
  SchedulerConfig tight{16, 4, 32};
  const Trace pressed = Drive(specs, tight, Plan(4, 13), 7);
  EXPECT_GT(pressed.preemptions, 0);
  EXPECT_EQ(pressed.outputs, base.outputs);
}

TEST(SchedulerTest, PreemptedSequencesResumeFromTheirKeptState) {
  const auto specs = RandomSpecs(12, 1);
  const Trace base = Drive(specs, SchedulerConfig{64, 16, 32}, Plan(16, 1000));
  SchedulerConfig tight{16, 4, 32};
  const Trace dropped = Drive(specs, tight, Plan(4, 13), 7);
  EXPECT_GT(dropped.stats.recomputed_tokens, 0);
  EXPECT_EQ(dropped.stats.resumed, 0);
  const Trace kept = Drive(specs, tight, Plan(4, 13), 7, /*keep=*/true);
  EXPECT_EQ(kept.outputs, base.outputs);
  EXPECT_GT(kept.preemptions, 0);
  // Every readmission restored what it had: nothing is computed twice.
  EXPECT_EQ(kept.stats.readmissions, kept.preemptions);
  EXPECT_EQ(kept.stats.resumed, kept.stats.readmissions);
  EXPECT_EQ(kept.stats.recomputed_tokens, 0);
}

TEST(SchedulerTest, ChunkedPrefillRespectsTheBudget) {
  std::vector<Spec> specs = {{std::vector<int32_t>(50, 3), 2, 0, 0}, {{1, 2}, 3, 0, 0}};
  cache::StateCache cache(Plan(4, 100));
  Scheduler sched({8, 4, 32}, &cache);
  sched.Add(1, specs[0].prompt, 0);
  sched.Add(2, specs[1].prompt, 0);
  BatchPlan p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u) << "the first prompt takes the whole budget";
  EXPECT_EQ(p.chunks[0].count, 8);
  EXPECT_FALSE(p.chunks[0].samples);
  sched.Commit(p, {});
  for (int i = 0; i < 5; ++i) {
    p = sched.Schedule();
    EXPECT_EQ(p.num_tokens, 8);
    sched.Commit(p, std::vector<int32_t>(std::count_if(p.chunks.begin(), p.chunks.end(),
                                                       [](const auto& c) { return c.samples; }), 7));
  }
  EXPECT_EQ(sched.computed(1), 48);
  p = sched.Schedule();  // the prompt's last 2 tokens, then the second request is admitted
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].count, 2);
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(p.chunks[1].id, 2u);
  EXPECT_EQ(p.num_tokens, 4);
}

TEST(SchedulerTest, PrioritiesFirstAndAgingPreventsStarvation) {
  // One slot; a stream of priority-0 requests and one priority-5 request that arrives first.
  std::vector<Spec> specs;
  specs.push_back({{1}, 3, 5, 0});
  for (int i = 0; i < 40; ++i) specs.push_back({{2, static_cast<int32_t>(i)}, 3, 0, i * 2});
  const Trace run = Drive(specs, {8, 1, 8}, Plan(1, 100));
  auto pos = std::find(run.finish_order.begin(), run.finish_order.end(), SeqId{1}) - run.finish_order.begin();
  EXPECT_GT(pos, 0) << "the low-priority request waits for higher ones";
  EXPECT_LT(pos, 30) << "but aging lets it run before the stream ends";
  const Trace no_aging = Drive(specs, {8, 1, 100000}, Plan(1, 100));
  EXPECT_EQ(no_aging.finish_order.back(), SeqId{1});
}

TEST(SchedulerTest, LargeRequestIsNotOvertakenForever) {
  // Memory for 24 tokens. A 20-token prompt waits behind a running request; later small ones
  // must not jump ahead of it while it waits.
  std::vector<Spec> specs = {{std::vector<int32_t>(10, 1), 6, 0, 0},
                             {std::vector<int32_t>(20, 2), 2, 0, 1}};
  for (int i = 0; i < 6; ++i) specs.push_back({{3, static_cast<int32_t>(i)}, 2, 0, 2 + i});
  const Trace run = Drive(specs, {32, 8, 1000}, Plan(8, 6));
  EXPECT_EQ(run.finish_order[0], SeqId{1});
  EXPECT_EQ(run.finish_order[1], SeqId{2});
}

TEST(SchedulerTest, RemoveFreesStateAnywhere) {
  cache::StateCache cache(Plan(4, 100));
  Scheduler sched({4, 4, 32}, &cache);
  sched.Add(1, std::vector<int32_t>(10, 1), 0);
  sched.Add(2, {1, 2}, 0);
  BatchPlan p = sched.Schedule();
  sched.Commit(p, {});
  EXPECT_TRUE(cache.Holds(1));
  sched.Remove(1);
  sched.Remove(2);
  sched.Remove(99);
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(cache.Stats().bytes_used, 0);
}

TEST(SchedulerTest, ForkSharesTheParentsStateWhenItFits) {
  cache::StateCache cache(Plan(2, 100));
  Scheduler sched({16, 4, 32}, &cache);
  sched.Add(256, {1, 2, 3}, 0);
  BatchPlan p = sched.Schedule();
  sched.Commit(p, {9});
  EXPECT_TRUE(sched.Fork(256, 257, 3, 8));
  EXPECT_EQ(sched.tokens(257), (std::vector<int32_t>{1, 2, 3, 8}));
  EXPECT_EQ(sched.computed(257), 3);
  EXPECT_FALSE(sched.Fork(256, 258, 3, 7)) << "the ring pool holds two sequences";
  EXPECT_EQ(sched.computed(258), 0);
  p = sched.Schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
}

// A fork that shares the parent's whole list pages (copy-on-write) needs only what it does not
// share: it runs where a copy would not fit, and the shared pages count once.
TEST(SchedulerTest, ForkSharingPagesNeedsOnlyTheRest) {
  cache::StateCache cache(Plan(4, 6));
  Scheduler sched({16, 4, 32}, &cache);
  std::vector<int32_t> prompt(16);
  for (int i = 0; i < 16; ++i) prompt[static_cast<size_t>(i)] = i + 1;
  sched.Add(256, prompt, 0);
  BatchPlan p = sched.Schedule();
  sched.Commit(p, {9});
  ASSERT_EQ(cache.Stats().pools[1].pages_used, 4);
  EXPECT_FALSE(sched.Fork(256, 257, 16, 8)) << "a copy of 4 pages does not fit in the 2 left";
  EXPECT_TRUE(sched.Fork(256, 258, 16, 7, /*shared=*/16));
  EXPECT_EQ(sched.computed(258), 16);
  EXPECT_TRUE(sched.Fork(256, 259, 16, 6, /*shared=*/12)) << "3 pages shared, 1 new";
  cache::CacheStats st = cache.Stats();
  EXPECT_EQ(st.pools[1].pages_used, 5);
  EXPECT_EQ(st.pools[1].pages_shared, 4);
  EXPECT_EQ(st.pools[1].page_refs, 12);
  sched.Remove(256);
  sched.Remove(258);
  EXPECT_EQ(cache.Stats().pools[1].pages_used, 4) << "259's pages, the 3 shared ones among them";
  sched.Remove(257);
  sched.Remove(259);
  EXPECT_EQ(cache.Stats().bytes_used, 0);
}

}  // namespace
}  // namespace dsinfer::scheduler

namespace dsinfer::scheduler {
namespace {

TEST(SchedulerTest, DraftsRideOnDecodesWithinTheBudget) {
  cache::StateCache cache(Plan(4, 100));
  Scheduler s({.max_batch_tokens = 6, .max_running = 4}, &cache);
  s.Add(1, {5, 6, 7}, 0);
  s.Add(2, {8, 9}, 0);
  s.SetDrafts(1, {1, 2});  // not decoding yet: ignored
  EXPECT_TRUE(s.drafts(1).empty());
  BatchPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  s.Commit(p, {10, 11});
  ASSERT_TRUE(s.Decoding(1) && s.Decoding(2));
  s.SetDrafts(1, {20, 21, 22, 23, 24, 25});
  s.SetDrafts(2, {30, 31});
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  // Budget 6: sequence 1 leaves one token for sequence 2, which gets what remains (none).
  EXPECT_EQ(p.chunks[0].id, 1u);
  EXPECT_EQ(p.chunks[0].count, 5);
  EXPECT_EQ(p.chunks[0].drafts, 4);
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(p.chunks[1].count, 1);
  EXPECT_EQ(p.chunks[1].drafts, 0);
  EXPECT_EQ(p.num_tokens, 6);
  // Two drafts of sequence 1 accepted: they and the next token are appended, the rest dropped.
  s.Commit(p, {40, 41}, {2, 0});
  EXPECT_EQ(s.tokens(1), (std::vector<int32_t>{5, 6, 7, 10, 20, 21, 40}));
  EXPECT_EQ(s.computed(1), 6);
  EXPECT_EQ(s.tokens(2), (std::vector<int32_t>{8, 9, 11, 41}));
  EXPECT_TRUE(s.drafts(1).empty() && s.drafts(2).empty());
  // None accepted: only the drawn token follows.
  s.SetDrafts(2, {50});
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[1].drafts, 1);
  s.Commit(p, {60, 61}, {0, 0});
  EXPECT_EQ(s.tokens(2).back(), 61);
  EXPECT_EQ(s.computed(2), 4);
}

}  // namespace
}  // namespace dsinfer::scheduler

namespace dsinfer::scheduler {
namespace {

TEST(SchedulerTest, ForkRespectsMaxRunningWhenMemoryWouldAllowMore) {
  cache::StateCache cache(Plan(8, 100));  // rings for 8 (e.g. prefix cache states beside them)
  Scheduler s({.max_batch_tokens = 64, .max_running = 2}, &cache);
  s.Add(1 << 8, {5, 6, 7}, 0);
  BatchPlan p = s.Schedule();
  s.Commit(p, {9});
  EXPECT_TRUE(s.Fork(1 << 8, (1 << 8) | 1, 3, 4));
  EXPECT_FALSE(s.Fork(1 << 8, (1 << 8) | 2, 3, 5)) << "two sequences run already";
  p = s.Schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
}

}  // namespace
}  // namespace dsinfer::scheduler

namespace dsinfer::scheduler {
namespace {

TEST(SchedulerTest, RetractDropsAPendingDrawAndRunsItsRowAgain) {
  cache::StateCache cache(Plan(2, 100));
  Scheduler s({.max_batch_tokens = 16, .max_running = 4}, &cache);
  s.Add(1 << 8, {5, 6, 7}, 0);
  BatchPlan p = s.Schedule();
  s.Commit(p, {kPendingToken});  // launched; the draw of the prompt's end is in flight
  s.Hold(1 << 8);
  // Its draw sits out: the prompt's last token is computed again by the next step.
  EXPECT_EQ(s.Retract(1 << 8), std::optional<int64_t>(2));
  EXPECT_EQ(s.tokens(1 << 8), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(s.computed(1 << 8), 2);
  p = s.Schedule();  // the hold went with the draw
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 2);
  EXPECT_EQ(p.chunks[0].count, 1);
  EXPECT_TRUE(p.chunks[0].samples);
  s.Commit(p, {kPendingToken});
  s.SetToken(1 << 8, 3, 9);
  // A sibling forked with the state of the prompt, and one waiting for memory (the ring pool
  // holds two sequences): both drop their pending first token; only the first holds state.
  ASSERT_TRUE(s.Fork(1 << 8, (1 << 8) | 1, 3, kPendingToken));
  ASSERT_FALSE(s.Fork(1 << 8, (1 << 8) | 2, 3, kPendingToken));
  EXPECT_EQ(s.Retract((1 << 8) | 1), std::optional<int64_t>(2));
  EXPECT_EQ(s.Retract((1 << 8) | 2), std::nullopt);
  EXPECT_EQ(s.tokens((1 << 8) | 2), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(s.computed((1 << 8) | 2), 0);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);  // the parent's decode and the sibling's last prompt token
  EXPECT_EQ(p.chunks[1].id, (1u << 8) | 1);
  EXPECT_EQ(p.chunks[1].start, 2);
  EXPECT_EQ(p.chunks[1].count, 1);
  EXPECT_TRUE(p.chunks[1].samples);
}

}  // namespace
}  // namespace dsinfer::scheduler
