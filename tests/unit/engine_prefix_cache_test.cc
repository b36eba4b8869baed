// The prefix cache on the CPU engine: requests that share prefixes (a long common prompt, a chat's
// next turn that repeats the previous turn and its answer) restore cached states and compute only
// the rest, and every output (ids and logprobs) is bit-identical to a cold run of the request
// alone; under memory pressure cached states give way (evictions) before running requests are
// preempted, and the outputs are still those of cold runs; a preempted request keeps its state and
// resumes from it; the host tier keeps evicted states for later hits; copies of states share their
// list pages copy-on-write (n > 1 forks, checkpoints, hits) and take less memory. Both model
// families (DeepSeek-V4, DeepSeek-V4.1).
#include <gtest/gtest.h>

#include "cache/memory_planner.h"
#include "engine_mix.h"
#include "engine_test_util.h"
#include "executor/model_runner.h"

namespace dsinfer::engine {
namespace {

using testing::Drain;
using testing::Family;
using testing::Outcome;
using Results = std::map<std::pair<uint64_t, int>, Outcome>;

EngineOptions CacheOptions(Family family, bool on,
                           EngineOptions::Overlap overlap = EngineOptions::Overlap::kOff) {
  EngineOptions o = testing::SmallEngineOptions(family);
  o.prefix_cache = on;
  o.prefix_checkpoint_interval = 128;
  o.overlap = overlap;
  return o;
}

std::unique_ptr<EngineCore> NewCore(const EngineOptions& o) {
  auto core = EngineCore::Create(o);
  if (!core.ok()) throw std::runtime_error(core.status().ToString());
  return std::move(core).value();
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Requests sharing a 300-token prefix (more than two checkpoint intervals), varied sampling.
std::vector<GenerateRequest> SharedPrefixRequests() {
  const auto base = testing::RandomIds(300, 50);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r;
    r.prompt_ids = Concat(base, testing::RandomIds(3 + 11 * i, 60 + i));
    auto& p = r.params;
    p.max_tokens = 6 + i;
    p.ignore_eos = true;
    p.logprobs = true;
    p.seed = 70 + i;
    p.temperature = i % 2 ? 0.9f : 0.0f;
    p.repetition_penalty = i == 3 ? 1.3f : 1.0f;
    p.n = i == 5 ? 2 : 1;
    reqs.push_back(r);
  }
  return reqs;
}

Results Cold(Family family, const std::vector<GenerateRequest>& reqs) {
  Results all;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto core = NewCore(CacheOptions(family, false));
    core->Add(i + 1, *core->Prepare(reqs[i]));
    for (auto& [key, o] : Drain(*core, [](int) {})) all[key] = o;
    EXPECT_EQ(core->Stats().prefix_queries, 0);
  }
  return all;
}

// With overlap scheduling, checkpoints are stored once the launch's tokens are known; a
// completion that stops on a token (EOS, a stop string) has had its last token run (the next step
// was launched) and keeps a state one token longer, but one that reaches its token limit is held.
void SharedPrefixesAndChatTurns(Family family, EngineOptions::Overlap overlap) {
  std::vector<GenerateRequest> reqs = SharedPrefixRequests();
  // A chat's next turn: request 1's prompt, its answer, and a new message.
  const Results first = Cold(family, {reqs[0]});
  GenerateRequest turn = reqs[0];
  turn.prompt_ids =
      Concat(Concat(reqs[0].prompt_ids, first.at({1, 0}).ids), testing::RandomIds(9, 80));
  reqs.push_back(turn);
  const Results cold = Cold(family, reqs);

  auto core = NewCore(CacheOptions(family, true, overlap));
  Results warm;
  // Request 1 alone, then its next turn alone, then the rest together at a random budget.
  for (uint64_t id : {1, 7}) {
    core->Add(id, *core->Prepare(reqs[id - 1]));
    for (auto& [key, o] : Drain(*core, [](int) {})) warm[key] = o;
  }
  const EngineStats after_turn = core->Stats();
  EXPECT_EQ(after_turn.prefix_hits, 1);
  // The next turn restored the previous turn's state at the end of its answer.
  // (With overlap too: a finish by the token limit is known at its launch, so the sequence is
  // held instead of running its last token.)
  EXPECT_EQ(after_turn.prefix_tokens_reused,
            static_cast<int64_t>(reqs[0].prompt_ids.size() + first.at({1, 0}).ids.size()) - 1);
  std::mt19937 rng(3);
  for (uint64_t id = 2; id <= 6; ++id) core->Add(id, *core->Prepare(reqs[id - 1]));
  for (auto& [key, o] :
       Drain(*core, [&](int) { core->scheduler().set_max_batch_tokens(1 + rng() % 64); })) {
    warm[key] = o;
  }
  EXPECT_EQ(warm, cold);
  const EngineStats st = core->Stats();
  // Every admission but the first request's found a state (a preempted request's readmission
  // is one more query, and a hit).
  EXPECT_GE(st.prefix_queries, 7);
  EXPECT_EQ(st.prefix_hits, st.prefix_queries - 1);
  // Requests 2-6 restore at least the 256 tokens of the common prefix's checkpoints.
  EXPECT_GE(st.prefix_tokens_reused - after_turn.prefix_tokens_reused, 5 * 256);
  EXPECT_GT(st.prefix_checkpoints, 0);
  EXPECT_EQ(core->num_states(), 0u);
  EXPECT_EQ(st.state_bytes_used, 0);
  EXPECT_GT(st.prefix_cache_bytes, 0);
  core->ClearPrefixCache();
  EXPECT_EQ(core->cache().Stats().bytes_used, 0);
}

class PrefixCacheFamilyTest : public ::testing::TestWithParam<Family> {};

TEST_P(PrefixCacheFamilyTest, SharedPrefixesAndChatTurnsGiveColdRunOutputs) {
  SharedPrefixesAndChatTurns(GetParam(), EngineOptions::Overlap::kOff);
}

TEST_P(PrefixCacheFamilyTest, OverlapSchedulingKeepsColdRunOutputs) {
  SharedPrefixesAndChatTurns(GetParam(), EngineOptions::Overlap::kOn);
}

// Four running, 16-token pages and rings planned for short requests (set in *o), and the smallest
// budget, in steps of 16-token pages of four sequences, that holds every request of `reqs` alone:
// several running at once outgrow it, so cached states give way and requests are preempted.
struct PressureBudget {
  int64_t alone = 0;     // that budget (0: none found)
  int64_t page_set = 0;  // its step
};
PressureBudget SmallestPressureBudget(const cache::StateLayout& layout,
                                      const std::vector<GenerateRequest>& reqs, EngineOptions* o) {
  o->max_running = 4;
  o->typical_length = 8;
  o->state_page_tokens = 16;
  PressureBudget b;
  b.page_set = 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4;
  b.alone = testing::SmallestBudgetHoldingEach(*o, reqs, 4 * layout.FixedBytes(), b.page_set);
  return b;
}

// Copying every page (`share` false), the budget forces preemption too. With copy-on-write
// sharing, requests restored from the common prefix's states share its list pages and fit beside
// each other even in the smallest budget (no preemption: PreemptedRequests* below have it with
// sharing), but cached states still give way.
void MemoryPressure(Family family, EngineOptions::Overlap overlap, bool share,
                    const Results& cold) {
  const std::vector<GenerateRequest> reqs = SharedPrefixRequests();
  EngineOptions o = CacheOptions(family, true, overlap);
  o.share_state_pages = share;
  const auto layout = testing::SmallLayout(family, testing::kEngineRollbackSlack);
  const PressureBudget budget = SmallestPressureBudget(layout, reqs, &o);
  ASSERT_GT(budget.alone, 0);
  // ... and half as much again: a second request runs beside the first at times.
  o.state_memory_bytes = budget.alone + (budget.alone - 4 * layout.FixedBytes()) / budget.page_set /
                                            2 * budget.page_set;
  if (share) o.state_memory_bytes = budget.alone;
  auto core = NewCore(o);
  std::mt19937 rng(5);
  // Staggered arrivals (one every 8 steps), so later requests find the earlier ones' states.
  const Results warm = Drain(
      *core,
      [&](int step) {
        if (step % 8 == 0 && step / 8 < static_cast<int>(reqs.size())) {
          const auto id = static_cast<uint64_t>(step / 8 + 1);
          auto p = core->Prepare(reqs[id - 1]);
          ASSERT_TRUE(p.ok()) << p.status().ToString();
          core->Add(id, *p);
        }
        core->scheduler().set_max_batch_tokens(1 + rng() % 48);
      },
      /*min_steps=*/8 * static_cast<int>(reqs.size()));
  EXPECT_EQ(warm, cold) << "sharing " << share;
  const EngineStats st = core->Stats();
  EXPECT_GT(st.prefix_evictions, 0) << "sharing " << share;
  if (!share) {
    EXPECT_GT(st.preemptions, 0) << "the budget must force preemption";
  }
  EXPECT_EQ(st.state_bytes_used, 0);
  EXPECT_EQ(st.state_bytes_shared_peak > 0, share);
}

TEST_P(PrefixCacheFamilyTest, MemoryPressureEvictsStatesAndOutputsStillMatch) {
  const Results cold = Cold(GetParam(), SharedPrefixRequests());
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOff, /*share=*/false, cold);
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOff, /*share=*/true, cold);
}

TEST_P(PrefixCacheFamilyTest, MemoryPressureWithOverlapSchedulingStillMatches) {
  const Results cold = Cold(GetParam(), SharedPrefixRequests());
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOn, /*share=*/false, cold);
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOn, /*share=*/true, cold);
}

INSTANTIATE_TEST_SUITE_P(Families, PrefixCacheFamilyTest,
                         ::testing::Values(Family::kV4, Family::kV41), testing::FamilyParamName);

// Requests with distinct prompts and long outputs, all at once under a state budget that holds
// each alone: decoding requests are preempted. A preempted request's state is kept (and, with the
// host tier, moved to host memory as state memory is needed), so its readmission restores it and
// computes at most the token it was about to run, where without keeping it recomputes from the
// last checkpoint of its tokens. The outputs are those of cold runs either way.
std::vector<GenerateRequest> LongOutputRequests() {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 5; ++i) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(20 + 37 * i, 90 + i);
    auto& p = r.params;
    p.max_tokens = 40 + 9 * i;
    p.ignore_eos = true;
    p.logprobs = true;
    p.seed = 30 + i;
    p.temperature = i % 2 ? 0.8f : 0.0f;
    reqs.push_back(r);
  }
  return reqs;
}

EngineStats PreemptionRun(Family family, EngineOptions o, const Results& cold,
                          const std::vector<GenerateRequest>& reqs) {
  auto core = NewCore(o);
  for (size_t i = 0; i < reqs.size(); ++i) core->Add(i + 1, *core->Prepare(reqs[i]));
  std::mt19937 rng(9);
  const Results warm =
      Drain(*core, [&](int) { core->scheduler().set_max_batch_tokens(8 + rng() % 40); });
  EXPECT_EQ(warm, cold) << testing::FamilyName(family);
  const EngineStats st = core->Stats();
  EXPECT_EQ(core->num_states(), 0u);
  EXPECT_EQ(st.state_bytes_used, 0);
  EXPECT_LE(st.host_cache_bytes, st.host_cache_bytes_total);
  return st;
}

void PreemptedRequestsKeepTheirState(Family family, EngineOptions::Overlap overlap) {
  const std::vector<GenerateRequest> reqs = LongOutputRequests();
  const Results cold = Cold(family, reqs);
  EngineOptions o = CacheOptions(family, true, overlap);
  const auto layout = testing::SmallLayout(family, testing::kEngineRollbackSlack);
  const PressureBudget budget = SmallestPressureBudget(layout, reqs, &o);
  ASSERT_GT(budget.alone, 0);
  o.state_memory_bytes = budget.alone + budget.page_set;

  o.prefix_keep_preempted = false;
  const EngineStats dropped = PreemptionRun(family, o, cold, reqs);
  ASSERT_GT(dropped.preemptions, 0) << "the budget must force preemption";
  EXPECT_EQ(dropped.preempted_states_kept, 0);
  EXPECT_GT(dropped.preempted_tokens_recomputed, 0);

  // Kept in state memory only: they are the newest cached states, so what memory needs usually
  // evicts them at once; the outputs still match.
  o.prefix_keep_preempted = true;
  const EngineStats kept = PreemptionRun(family, o, cold, reqs);
  EXPECT_GT(kept.preempted_states_kept, 0);

  // With the host tier they survive there and come back.
  o.host_cache_bytes = 64 << 20;
  const EngineStats host = PreemptionRun(family, o, cold, reqs);
  ASSERT_GT(host.preemptions, 0);
  EXPECT_GT(host.preempted_states_kept, 0);
  EXPECT_GT(host.host_cache_offloads, 0);
  EXPECT_GT(host.host_cache_restores, 0);
  EXPECT_GT(host.preempted_resumed, 0);
  EXPECT_EQ(host.preempted_resumed, host.preempted_readmissions);
  EXPECT_EQ(host.preempted_tokens_recomputed, 0);
  EXPECT_LT(host.forward_tokens, dropped.forward_tokens);
}

TEST_P(PrefixCacheFamilyTest, PreemptedRequestsResumeFromTheirKeptState) {
  PreemptedRequestsKeepTheirState(GetParam(), EngineOptions::Overlap::kOff);
}

TEST_P(PrefixCacheFamilyTest, PreemptedRequestsResumeWithOverlapScheduling) {
  PreemptedRequestsKeepTheirState(GetParam(), EngineOptions::Overlap::kOn);
}

// Four long prompts, each asked twice, one request at a time, with room for one cached state in
// state memory: without the host tier the second round finds nothing; with it, each request of
// the second round restores its prompt's checkpoint from host memory. A host tier too small for
// all of them drops its least recently used states and still gives cold-run outputs.
TEST_P(PrefixCacheFamilyTest, HostTierKeepsEvictedStatesForLaterHits) {
  const Family family = GetParam();
  std::vector<GenerateRequest> reqs;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i) {
      GenerateRequest r;
      r.prompt_ids = Concat(testing::RandomIds(150, 40 + i), testing::RandomIds(5, 60 + round));
      r.params.max_tokens = 4;
      r.params.ignore_eos = true;
      r.params.logprobs = true;
      r.params.seed = 5 + i;
      reqs.push_back(r);
    }
  }
  const Results cold = Cold(family, reqs);
  const auto run = [&](int64_t host_bytes) {
    EngineOptions o = CacheOptions(family, true);
    o.max_running = 1;
    o.prefix_cache_entries = 1;  // one cached state in state memory, its rings set aside
    o.state_page_tokens = 32;    // a state of several pages
    o.host_cache_bytes = host_bytes;
    auto core = NewCore(o);
    Results warm;
    for (size_t i = 0; i < reqs.size(); ++i) {
      core->Add(i + 1, *core->Prepare(reqs[i]));
      for (auto& [key, out] : Drain(*core, [](int) {})) warm[key] = out;
    }
    EXPECT_EQ(warm, cold) << "host tier of " << host_bytes << " bytes";
    EXPECT_EQ(core->num_states(), 0u);
    return core->Stats();
  };
  const EngineStats off = run(0);
  EXPECT_EQ(off.prefix_hits, 0);
  EXPECT_EQ(off.host_cache_offloads, 0);
  const EngineStats on = run(64 << 20);
  EXPECT_EQ(on.prefix_hits, 4);
  EXPECT_EQ(on.host_cache_restores, 4);
  EXPECT_GE(on.prefix_tokens_reused, 4 * 128);
  EXPECT_GT(on.host_cache_offloads, 0);
  EXPECT_EQ(on.host_cache_evictions, 0);
  EXPECT_EQ(on.host_cache_entries + 1, on.prefix_cache_entries);
  ASSERT_GT(on.host_cache_entries, 0);
  // Room for about two of its states: the older ones go first, and the first round's checkpoints
  // are gone by the second.
  const int64_t per_state = on.host_cache_bytes / on.host_cache_entries;
  const EngineStats small = run(per_state * 5 / 2);
  EXPECT_GT(small.host_cache_evictions, 0);
  EXPECT_LE(small.host_cache_bytes, per_state * 5 / 2);
  EXPECT_LT(small.prefix_hits, on.prefix_hits);
}

// Copy-on-write state pages: the n > 1 siblings forked after a long prompt, the prompt's
// checkpoints and later requests restored from them share the prompt's list pages instead of
// copying them. The outputs are those of cold runs with sharing on and off (with and without the
// prefix cache: forks alone), and with sharing pages are shared and the state memory in use at
// its peak is smaller.
TEST_P(PrefixCacheFamilyTest, SharedStatePagesKeepOutputsAndTakeLessMemory) {
  const Family family = GetParam();
  const auto base = testing::RandomIds(300, 21);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    GenerateRequest r;
    r.prompt_ids = Concat(base, testing::RandomIds(5 + 7 * i, 22 + i));
    r.params.max_tokens = 5;
    r.params.ignore_eos = true;
    r.params.logprobs = true;
    r.params.seed = 40 + i;
    r.params.temperature = 0.9f;
    r.params.n = i == 0 ? 4 : 2;
    reqs.push_back(r);
  }
  const Results cold = Cold(family, reqs);
  struct Run {
    EngineStats stats;
    int64_t peak_used = 0;    // state memory in use, at its peak over the steps
    int64_t peak_shared = 0;  // what sharing saved, at its peak
  };
  const auto run = [&](bool prefix_cache, bool share) {
    EngineOptions o = CacheOptions(family, prefix_cache);
    o.share_state_pages = share;
    auto core = NewCore(o);
    Run r;
    Results warm;
    // One request after the other: the later ones restore the first one's checkpoints.
    for (size_t i = 0; i < reqs.size(); ++i) {
      core->Add(i + 1, *core->Prepare(reqs[i]));
      const auto measure = [&](int) {
        const cache::CacheStats st = core->cache().Stats();
        r.peak_used = std::max(r.peak_used, st.bytes_used);
        r.peak_shared = std::max(r.peak_shared, st.bytes_referenced - st.bytes_used);
        EXPECT_EQ(core->Stats().state_bytes_shared, st.bytes_referenced - st.bytes_used);
      };
      for (auto& [key, out] : Drain(*core, measure)) warm[key] = out;
    }
    EXPECT_EQ(warm, cold) << "prefix cache " << prefix_cache << ", sharing " << share;
    r.stats = core->Stats();
    EXPECT_EQ(r.stats.state_bytes_used, 0);
    EXPECT_EQ(core->num_states(), 0u);
    core->ClearPrefixCache();
    EXPECT_EQ(core->cache().Stats().bytes_used, 0);
    return r;
  };
  // n > 1 forks alone.
  const Run forks_copied = run(false, false), forks_shared = run(false, true);
  EXPECT_EQ(forks_copied.peak_shared, 0);
  EXPECT_GT(forks_shared.peak_shared, 0);
  EXPECT_LT(forks_shared.peak_used, forks_copied.peak_used);
  // With the prefix cache: checkpoints and hits too.
  const Run copied = run(true, false), shared = run(true, true);
  EXPECT_EQ(copied.peak_shared, 0);
  EXPECT_GT(shared.peak_shared, forks_shared.peak_shared);
  EXPECT_LT(shared.peak_used, copied.peak_used);
  EXPECT_GT(shared.stats.prefix_hits, 0);
  EXPECT_EQ(shared.stats.prefix_hits, copied.stats.prefix_hits);
  EXPECT_EQ(shared.stats.prefix_tokens_reused, copied.stats.prefix_tokens_reused);
}

// The CPU runner's copy-on-write on a rollback: a forked state that shares its parent's list pages
// up to its whole length (more than the engine shares: it leaves out what a rollback may rewrite)
// and then rolls back past them copies the pages it is about to rewrite (StateCache::Unshare)
// before writing, so both go on exactly as states computed on their own do.
TEST_P(PrefixCacheFamilyTest, RunnerRollbackPastSharedRowsCopiesThePages) {
  executor::RunnerOptions ro;
  ro.model_dir = testing::EngineModelDir(GetParam());
  ro.num_threads = 1;
  ro.max_rollback = 4;
  ro.device = executor::Device::kCpu;
  sampler::SamplingParams params;
  params.temperature = 0;
  params.logprobs = true;
  params.top_logprobs = 8;
  const std::vector<int32_t> prompt = testing::RandomIds(128, 31);
  const std::vector<int32_t> x = testing::RandomIds(5, 32), y = testing::RandomIds(3, 33);
  struct Runner {
    std::unique_ptr<executor::ModelRunner> runner;
    std::unique_ptr<cache::StateCache> cache;
  };
  const auto start = [&] {
    Runner r;
    auto runner = executor::CreateCpuModelRunner(ro);
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    r.runner = std::move(runner).value();
    cache::PlanOptions po;
    po.budget_bytes = 64 << 20;
    po.max_sequences = 4;
    po.typical_length = 256;
    po.rows_per_page = 2;  // many pages: a rate-4 list's page is 8 tokens
    auto plan = cache::PlanMemory(r.runner->state_layout(), po);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    r.cache = std::make_unique<cache::StateCache>(*plan);
    EXPECT_TRUE(r.runner->BindCache(r.cache.get()).ok());
    return r;
  };
  // Runs one chunk of `seq` (reserved first) and draws from its last row: the ids and logprobs.
  const auto run = [&](Runner& r, uint64_t seq, int64_t at, const std::vector<int32_t>& tokens) {
    EXPECT_TRUE(r.cache->Reserve(seq, at + static_cast<int64_t>(tokens.size())).ok());
    executor::RunDraw d;
    d.input.params = &params;
    d.input.position = at + static_cast<int64_t>(tokens.size());
    auto out = r.runner->Run({{seq, at, tokens}}, {d});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    std::vector<float> got;
    if (!out.ok()) return got;
    for (const auto& t : out->tokens) {
      got.push_back(static_cast<float>(t.id));
      got.push_back(t.logprob);
      for (const auto& alt : t.top)
        got.insert(got.end(), {static_cast<float>(alt.id), alt.logprob});
    }
    return got;
  };
  const auto shared_pages = [](const cache::StateCache& c) {
    int64_t n = 0;
    for (const auto& pool : c.Stats().pools) n += pool.pages_shared;
    return n;
  };

  Runner a = start();
  run(a, 1, 0, prompt);
  a.cache->Share(1, 2, 128);
  ASSERT_TRUE(a.cache->Reserve(2, 128).ok());
  a.runner->Fork(1, 2);
  const int64_t shared = shared_pages(*a.cache);
  ASSERT_GT(shared, 0);
  ASSERT_TRUE(a.runner->Rollback(2, 124).ok());
  EXPECT_LT(shared_pages(*a.cache), shared) << "the page of the rows 124.. rewrite is copied";
  EXPECT_GT(shared_pages(*a.cache), 0) << "the pages below stay shared";
  const std::vector<float> forked = run(a, 2, 124, x), parent = run(a, 1, 128, y);

  Runner b = start();
  std::vector<int32_t> alone = prompt;
  alone.insert(alone.end(), y.begin(), y.end());
  EXPECT_EQ(parent, run(b, 1, 0, alone));
  alone.assign(prompt.begin(), prompt.begin() + 124);
  alone.insert(alone.end(), x.begin(), x.end());
  EXPECT_EQ(forked, run(b, 2, 0, alone));
  a.runner->Release(1);
  a.cache->Free(1);
  a.runner->Release(2);
  a.cache->Free(2);
  EXPECT_EQ(a.cache->Stats().bytes_used, 0);
}

TEST(PrefixCacheTest, BadOptionsAreRefused) {
  EngineOptions o = CacheOptions(Family::kV4, true);
  o.prefix_checkpoint_interval = 100;
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.prefix_checkpoint_interval = 0;
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = CacheOptions(Family::kV4, false);
  o.host_cache_bytes = 1 << 20;  // a host tier without the prefix cache
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer::engine
