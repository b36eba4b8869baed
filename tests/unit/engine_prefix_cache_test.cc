// The prefix cache on the CPU engine: requests that share prefixes (a long common prompt, a chat's
// next turn that repeats the previous turn and its answer) restore cached states and compute only
// the rest, and every output (ids and logprobs) is bit-identical to a cold run of the request
// alone; under memory pressure cached states give way (evictions) before running requests are
// preempted, and the outputs are still those of cold runs. Both model families (DeepSeek-V4,
// DeepSeek-V4.1).
#include <gtest/gtest.h>

#include "engine_mix.h"
#include "engine_test_util.h"

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

void MemoryPressure(Family family, EngineOptions::Overlap overlap) {
  const std::vector<GenerateRequest> reqs = SharedPrefixRequests();
  const Results cold = Cold(family, reqs);
  EngineOptions o = CacheOptions(family, true, overlap);
  // The smallest budget (in steps of 16-token pages of four sequences) that holds every request
  // alone: several running at once outgrow it, so cached states give way and requests are
  // preempted.
  const auto layout = testing::SmallLayout(family, testing::kEngineRollbackSlack);
  o.max_running = 4;
  o.typical_length = 8;
  o.state_page_tokens = 16;
  // ... and half as much again: a second request runs beside the first at times.
  const int64_t page_set = 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4;
  const int64_t alone =
      testing::SmallestBudgetHoldingEach(o, reqs, 4 * layout.FixedBytes(), page_set);
  ASSERT_GT(alone, 0);
  o.state_memory_bytes = alone + (alone - 4 * layout.FixedBytes()) / page_set / 2 * page_set;
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
  EXPECT_EQ(warm, cold);
  const EngineStats st = core->Stats();
  EXPECT_GT(st.prefix_evictions, 0);
  EXPECT_GT(st.preemptions, 0) << "the budget must force preemption";
  EXPECT_EQ(st.state_bytes_used, 0);
}

TEST_P(PrefixCacheFamilyTest, MemoryPressureEvictsStatesAndOutputsStillMatch) {
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOff);
}

TEST_P(PrefixCacheFamilyTest, MemoryPressureWithOverlapSchedulingStillMatches) {
  MemoryPressure(GetParam(), EngineOptions::Overlap::kOn);
}

INSTANTIATE_TEST_SUITE_P(Families, PrefixCacheFamilyTest,
                         ::testing::Values(Family::kV4, Family::kV41), testing::FamilyParamName);

TEST(PrefixCacheTest, BadOptionsAreRefused) {
  EngineOptions o = CacheOptions(Family::kV4, true);
  o.prefix_checkpoint_interval = 100;
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.prefix_checkpoint_interval = 0;
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer::engine
