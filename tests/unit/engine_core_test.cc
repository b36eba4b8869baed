// EngineCore on the small random models: outputs never depend on batch composition, chunk budgets
// or preemption (exact equality: the model is batch- and chunking-invariant and sampling is keyed
// by (seed, position, index)); n > 1 shares the prompt; abort frees everything; stop rules. The
// tests of the engine's exactness run on both model families (DeepSeek-V4 and DeepSeek-V4.1, one
// engine through the model-family seam).
#include <gtest/gtest.h>

#include <functional>

#include "engine_mix.h"
#include "engine_test_util.h"

namespace dsinfer::engine {
namespace {

using testing::Drain;
using testing::Family;
using testing::Outcome;
using Results = std::map<std::pair<uint64_t, int>, Outcome>;

// The tests that every model family must pass.
class EngineFamilyTest : public ::testing::TestWithParam<Family> {
 protected:
  EngineOptions Options() const { return testing::SmallEngineOptions(GetParam()); }
};

std::unique_ptr<EngineCore> NewCore(const EngineOptions& o = testing::SmallEngineOptions(),
                                    std::unique_ptr<TextCodec> codec = nullptr) {
  auto core = EngineCore::Create(o, std::move(codec));
  if (!core.ok()) throw std::runtime_error(core.status().ToString());
  return std::move(core).value();
}

// A varied set: greedy, seeded with each truncation, penalties, n = 2, logprobs.
std::vector<GenerateRequest> MixedRequests() {
  std::vector<GenerateRequest> reqs;
  std::mt19937 rng(21);
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(1 + static_cast<int>(rng() % 40), 100 + i);
    auto& p = r.params;
    p.max_tokens = 4 + static_cast<int>(rng() % 10);
    p.ignore_eos = i % 3 != 0;
    p.logprobs = i % 2 == 0;
    p.top_logprobs = i == 2 ? 3 : 0;
    p.seed = 1000 + i;
    switch (i % 4) {
      case 0: p.temperature = 0; break;
      case 1: p.top_k = 20; p.temperature = 0.8f; break;
      case 2: p.top_p = 0.9f; p.min_p = 0.02f; p.repetition_penalty = 1.2f; break;
      case 3: p.n = 2; p.frequency_penalty = 0.5f; p.presence_penalty = 0.3f; break;
    }
    reqs.push_back(r);
  }
  return reqs;
}

// Each request alone in a fresh engine, keyed by its position in `reqs` (request id i + 1).
Results Alone(const std::vector<GenerateRequest>& reqs,
              const EngineOptions& options = testing::SmallEngineOptions()) {
  Results all;
  auto core = NewCore(options);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto p = core->Prepare(reqs[i]);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    core->Add(i + 1, *p);
    for (auto& [key, o] : Drain(*core, [](int) {})) all[key] = o;
  }
  return all;
}

// All requests in one engine, arriving at random steps, with a random token budget every step.
Results Mixed(const std::vector<GenerateRequest>& reqs, uint32_t seed, EngineOptions o,
              int64_t* preemptions = nullptr,
              const std::function<void(EngineCore&)>& setup = nullptr,
              EngineStats* stats = nullptr) {
  auto core = NewCore(o);
  if (setup) setup(*core);
  std::mt19937 rng(seed);
  std::vector<int> arrive(reqs.size());
  for (auto& a : arrive) a = static_cast<int>(rng() % 12);
  auto results = Drain(*core, [&](int step) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (arrive[i] != step) continue;
      auto p = core->Prepare(reqs[i]);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      core->Add(i + 1, *p);
    }
    core->scheduler().set_max_batch_tokens(1 + rng() % 24);
  }, /*min_steps=*/12);
  EXPECT_EQ(core->num_states(), 0u);
  EXPECT_EQ(core->Stats().state_bytes_used, 0);
  core->ClearPrefixCache();
  EXPECT_EQ(core->cache().Stats().bytes_used, 0);
  if (preemptions) *preemptions = core->Stats().preemptions;
  if (stats) *stats = core->Stats();
  return results;
}

// Speculative decoding with an oracle drafter: it proposes the reference output's next tokens
// with one of them wrong at a position that varies from step to step (sometimes none), so verify
// steps accept anything from 0 to k drafts and roll back the rest.
EngineCore::Drafter OracleDrafter(const std::vector<GenerateRequest>& reqs,
                                  const Results& reference, int32_t vocab) {
  return [&reqs, &reference, vocab](uint64_t id, int index, const std::vector<int32_t>& tokens,
                                    int k) {
    const auto& ref = reference.at({id, index}).ids;
    const auto done = static_cast<int64_t>(tokens.size() - reqs[id - 1].prompt_ids.size());
    std::vector<int32_t> d;
    for (int64_t i = done; i < std::min<int64_t>(done + k, static_cast<int64_t>(ref.size())); ++i)
      d.push_back(ref[i]);
    const auto wrong = static_cast<size_t>((id * 7 + index * 3 + done * 5) % (k + 2));
    if (wrong < d.size()) d[wrong] = (d[wrong] + 1) % vocab;
    return d;
  };
}

TEST_P(EngineFamilyTest, OutputsDoNotDependOnBatchCompositionOrChunking) {
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  ASSERT_EQ(alone.size(), 10u);  // 8 requests, two with n = 2
  for (const auto& [key, o] : alone) {
    EXPECT_NE(o.finish, FinishReason::kNone);
    EXPECT_FALSE(o.ids.empty());
  }
  for (uint32_t trial = 1; trial <= 3; ++trial) {
    EXPECT_EQ(Mixed(reqs, trial, Options()), alone) << "trial " << trial;
  }
}

// Overlap scheduling (the GPU's default) on the CPU engine: with random arrivals and a random
// budget every step, the outputs of requests alone without it.
TEST_P(EngineFamilyTest, OverlapSchedulingGivesTheSameOutputs) {
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  EngineOptions o = Options();
  o.overlap = EngineOptions::Overlap::kOn;
  EngineStats stats;
  for (uint32_t trial = 1; trial <= 2; ++trial) {
    EXPECT_EQ(Mixed(reqs, trial, o, nullptr, nullptr, &stats), alone) << "trial " << trial;
    EXPECT_TRUE(stats.overlap);
  }
}

// A completion whose last token is known at its launch (its token limit) is held, not scheduled
// once more: the same forward work as the serial loop.
TEST(EngineCoreTest, OverlapRunsNoExtraTokenForALengthFinish) {
  std::vector<int64_t> forwarded;
  for (auto overlap : {EngineOptions::Overlap::kOff, EngineOptions::Overlap::kOn}) {
    EngineOptions o = testing::SmallEngineOptions();
    o.overlap = overlap;
    auto core = NewCore(o);
    for (uint64_t id = 1; id <= 4; ++id) {
      GenerateRequest r;
      r.prompt_ids = testing::RandomIds(5 + static_cast<int>(id), static_cast<uint32_t>(id));
      r.params.max_tokens = 3 + static_cast<int>(id);
      r.params.ignore_eos = true;
      r.params.temperature = 0;
      core->Add(id, *core->Prepare(r));
    }
    const auto out = Drain(*core, [](int) {});
    for (const auto& [key, o2] : out) EXPECT_EQ(o2.finish, FinishReason::kLength);
    forwarded.push_back(core->Stats().forward_tokens);
  }
  EXPECT_EQ(forwarded[0], forwarded[1]);
}

TEST(EngineCoreTest, GoldenMixIsTheSameWithOverlapOnAndOff) {
  testing::ExpectOverlapExact(Device::kCpu);
}

TEST(EngineCoreTest, GoldenV41MixIsTheSameWithOverlapOnAndOff) {
  testing::ExpectOverlapExact(Device::kCpu, testing::kGoldenV41ModelA);
}

TEST_P(EngineFamilyTest, PreemptionThenResumptionGivesIdenticalOutput) {
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  // The smallest budget (in steps of one page set) that still holds the longest request alone.
  const auto layout = testing::SmallLayout(GetParam(), testing::kEngineRollbackSlack);
  EngineOptions o = Options();
  o.max_running = 4;
  o.typical_length = 8;
  o.state_page_tokens = 16;  // small pages: the requests outgrow their reservations step by step
  int64_t preemptions = 0;
  o.state_memory_bytes = testing::SmallestBudgetHoldingEach(
      o, reqs, 4 * layout.FixedBytes(), 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4);
  EXPECT_EQ(Mixed(reqs, 5, o, &preemptions), alone);
  EXPECT_GT(preemptions, 0) << "the budget must force preemption";
  o.overlap = EngineOptions::Overlap::kOn;  // preempted with a token in flight
  EXPECT_EQ(Mixed(reqs, 5, o, &preemptions), alone);
  EXPECT_GT(preemptions, 0) << "the budget must force preemption";
  // The preempted requests' kept states through the prefix cache's host tier and back.
  o.host_cache_bytes = 64 << 20;
  for (auto overlap : {EngineOptions::Overlap::kOn, EngineOptions::Overlap::kOff}) {
    o.overlap = overlap;
    EngineStats st;
    EXPECT_EQ(Mixed(reqs, 5, o, &preemptions, nullptr, &st), alone);
    EXPECT_GT(st.preemptions, 0) << "the budget must force preemption";
    EXPECT_GT(st.preempted_resumed, 0);
    EXPECT_GT(st.host_cache_restores, 0);
  }
}

TEST_P(EngineFamilyTest, NGreaterThanOneComputesThePromptOnce) {
  GenerateRequest r;
  r.prompt_ids = testing::RandomIds(30, 3);
  r.params.n = 3;
  r.params.max_tokens = 4;
  r.params.ignore_eos = true;
  r.params.seed = 5;
  auto core = NewCore(Options());
  core->Add(1, *core->Prepare(r));
  const auto out = Drain(*core, [](int) {});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(core->Stats().forward_tokens, 30 + 3 * 3) << "one prefill, then 3 decodes per completion";
  EXPECT_EQ(core->Stats().generated_tokens, 12);
  EXPECT_NE(out.at({1, 0}).ids, out.at({1, 1}).ids);
  EXPECT_EQ(out.at({1, 0}).ids.size(), 4u);
}

TEST_P(EngineFamilyTest, AbortFreesAllState) {
  auto core = NewCore(Options());
  for (uint64_t id = 1; id <= 6; ++id) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(20, static_cast<uint32_t>(id));
    r.params.max_tokens = 50;
    r.params.ignore_eos = true;
    r.params.n = id == 3 ? 3 : 1;
    core->Add(id, *core->Prepare(r));
  }
  std::vector<StreamEvent> events;
  for (int i = 0; i < 3; ++i) core->Step(&events);
  EXPECT_GT(core->num_states(), 0u);
  EXPECT_GT(core->cache().Stats().bytes_used, 0);
  events.clear();
  for (uint64_t id = 1; id <= 6; ++id) core->Abort(id, &events);
  core->Abort(99, &events);
  EXPECT_EQ(events.size(), 8u);
  for (const auto& ev : events) EXPECT_EQ(ev.finish, FinishReason::kAbort);
  EXPECT_FALSE(core->HasWork());
  EXPECT_EQ(core->num_states(), 0u);
  EXPECT_EQ(core->Stats().state_bytes_used, 0);
  core->ClearPrefixCache();  // the prompts' states (checkpoints at each prompt's end)
  const auto stats = core->cache().Stats();
  EXPECT_EQ(stats.bytes_used, 0);
  EXPECT_EQ(stats.requests, 0);
  EXPECT_EQ(core->Stats().requests_running + core->Stats().requests_waiting, 0);
}

TEST(EngineCoreTest, StopIdsMaxTokensAndMinTokens) {
  auto core = NewCore();
  GenerateRequest r;
  r.prompt_ids = testing::RandomIds(10, 4);
  r.params.temperature = 0;
  r.params.max_tokens = 12;
  r.params.ignore_eos = true;
  core->Add(1, *core->Prepare(r));
  const auto free_run = Drain(*core, [](int) {}).at({1, 0});
  ASSERT_EQ(free_run.ids.size(), 12u);
  EXPECT_EQ(free_run.finish, FinishReason::kLength);
  // Stop at the 5th token's id; it is kept in the output.
  r.params.stop_token_ids = {free_run.ids[4]};
  core->Add(2, *core->Prepare(r));
  auto stopped = Drain(*core, [](int) {}).at({2, 0});
  const auto first = std::find(free_run.ids.begin(), free_run.ids.end(), free_run.ids[4]) - free_run.ids.begin();
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(free_run.ids.begin(), free_run.ids.begin() + first + 1));
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.stop, "id:" + std::to_string(free_run.ids[4]));
  // min_tokens masks the stop id until enough tokens exist.
  r.params.min_tokens = static_cast<int>(first) + 2;
  core->Add(3, *core->Prepare(r));
  auto late = Drain(*core, [](int) {}).at({3, 0});
  EXPECT_GE(late.ids.size(), first + 2);
}

TEST(EngineCoreTest, StopStringsAcrossTokenBoundaries) {
  auto core = NewCore(testing::SmallEngineOptions(), std::make_unique<testing::LetterCodec>());
  GenerateRequest r;
  r.prompt = "thequickbrownfox";
  r.params.temperature = 0;
  r.params.max_tokens = 16;
  r.params.ignore_eos = true;
  core->Add(1, *core->Prepare(r));
  const auto free_run = Drain(*core, [](int) {}).at({1, 0});
  ASSERT_EQ(free_run.text.size(), free_run.ids.size() + std::count_if(free_run.ids.begin(), free_run.ids.end(),
                                                                       [](int32_t id) { return id >= 260; }));
  ASSERT_GE(free_run.text.size(), 8u);
  // A stop string made of the last letter of token 3 and the first of token 4.
  std::string before;
  for (int i = 0; i < 3; ++i) before += testing::LetterCodec::Piece(free_run.ids[i]);
  const std::string stop = before.substr(before.size() - 1) + testing::LetterCodec::Piece(free_run.ids[3]).substr(0, 1);
  const size_t at = free_run.text.find(stop);
  ASSERT_NE(at, std::string::npos);
  r.params.stop = {stop};
  core->Add(2, *core->Prepare(r));
  auto stopped = Drain(*core, [](int) {}).at({2, 0});
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.stop, stop);
  EXPECT_EQ(stopped.text, free_run.text.substr(0, at));
  r.params.include_stop_str_in_output = true;
  core->Add(3, *core->Prepare(r));
  EXPECT_EQ(Drain(*core, [](int) {}).at({3, 0}).text, free_run.text.substr(0, at + stop.size()));
}

TEST(EngineCoreTest, BadRequestsGetClearErrors) {
  EngineOptions o = testing::SmallEngineOptions();
  o.max_model_len = 32;
  auto core = NewCore(o);
  GenerateRequest good;
  good.prompt_ids = {1, 2, 3};
  EXPECT_TRUE(core->Prepare(good).ok());
  auto code = [&](GenerateRequest r) { return core->Prepare(r).status().code(); };
  GenerateRequest r = good;
  r.params.temperature = -1;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.prompt_ids = testing::RandomIds(32, 1);
  EXPECT_EQ(code(r), StatusCode::kOutOfRange) << "prompt as long as the context";
  r = good;
  r.prompt_ids = {5, 300};
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument) << "id outside the vocabulary";
  r = good;
  r.prompt = "text";
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument) << "two prompt sources";
  r.prompt_ids.clear();
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument) << "no tokenizer";
  r = good;
  r.prompt_ids.clear();
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument) << "no prompt";
  r = good;
  r.params.stop = {"x"};
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument) << "stop strings without a tokenizer";
  r = good;
  r.params.logit_bias[1000] = 1;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.params.max_tokens = 100;
  const auto over = core->Prepare(r);
  ASSERT_EQ(over.status().code(), StatusCode::kOutOfRange)
      << "prompt + max_tokens beyond the context";
  EXPECT_NE(
      over.status().message().find("the context holds 32 tokens, but 103 were requested (3 in the "
                                   "prompt, max_tokens 100); lower max_tokens to at most 29"),
      std::string::npos)
      << over.status().message();
  r.max_tokens_up_to_context = true;
  EXPECT_EQ(core->Prepare(r)->max_new_tokens, 32 - 3) << "capped by the context";

  o.model_dir = "/nonexistent/model";
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kNotFound);
  o = testing::SmallEngineOptions();
  o.state_memory_bytes = 1000;
  EXPECT_EQ(EngineCore::Create(o).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace dsinfer::engine

namespace dsinfer::engine {
namespace {

EngineOptions Speculative(SpeculativeOptions::Method method, int k, bool adaptive = false,
                          EngineOptions o = testing::SmallEngineOptions()) {
  o.speculative.method = method;
  o.speculative.num_tokens = k;
  o.speculative.adaptive = adaptive;
  return o;
}

class EngineSpeculativeFamilyTest : public EngineFamilyTest {};

TEST_P(EngineSpeculativeFamilyTest, VerifiedDraftsGiveTheSameTokensAndLogprobs) {
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  for (bool adaptive : {false, true}) {
    for (uint32_t trial = 1; trial <= 2; ++trial) {
      EngineStats st;
      const auto setup = [&](EngineCore& core) {
        core.set_drafter(OracleDrafter(reqs, alone, static_cast<int32_t>(core.vocab_size())));
      };
      EXPECT_EQ(Mixed(reqs, trial,
                      Speculative(SpeculativeOptions::Method::kNgram, 4, adaptive, Options()),
                      nullptr, setup, &st),
                alone)
          << "trial " << trial << " adaptive " << adaptive;
      // Both outcomes of verification happened: accepted drafts and rolled-back ones.
      EXPECT_GT(st.spec_accepted_tokens, 0);
      EXPECT_LT(st.spec_accepted_tokens, st.spec_draft_tokens);
      EXPECT_GT(st.spec_verify_rows, 0);
    }
  }
}

TEST_P(EngineSpeculativeFamilyTest, PreemptionWithDraftsGivesIdenticalOutput) {
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  const int k = 4;
  const auto layout = testing::SmallLayout(GetParam(), testing::EngineRollbackSlack(k));
  EngineOptions o = Speculative(SpeculativeOptions::Method::kNgram, k, false, Options());
  o.max_running = 4;
  o.typical_length = 8;
  o.state_page_tokens = 16;
  o.state_memory_bytes = testing::SmallestBudgetHoldingEach(
      o, reqs, 4 * layout.FixedBytes(), 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4);
  int64_t preemptions = 0;
  EngineStats st;
  const auto setup = [&](EngineCore& core) {
    core.set_drafter(OracleDrafter(reqs, alone, static_cast<int32_t>(core.vocab_size())));
  };
  // A few arrival orders, so that some preempt whatever the family's page sizes; then with the
  // preempted requests' states kept in the host tier.
  for (int64_t host : {0, 64 << 20}) {
    o.host_cache_bytes = host;
    int64_t total = 0, resumed = 0;
    for (uint32_t seed : {5u, 6u, 7u}) {
      EXPECT_EQ(Mixed(reqs, seed, o, &preemptions, setup, &st), alone) << "seed " << seed;
      EXPECT_GT(st.spec_accepted_tokens, 0);
      total += preemptions;
      resumed += st.preempted_resumed;
    }
    EXPECT_GT(total, 0) << "the budget must force preemption";
    if (host > 0) {
      EXPECT_GT(resumed, 0);
    }
  }
  // The family's model drafter: DeepSeek-V4's MTP layer (its unseen rows travel with the kept
  // state), DeepSeek-V4.1's DSpark (its context rings are part of the state).
  {
    EngineOptions m = Speculative(GetParam() == Family::kV4 ? SpeculativeOptions::Method::kMtp
                                                            : SpeculativeOptions::Method::kDSpark,
                                  k, false, Options());
    m.max_running = o.max_running;
    m.typical_length = o.typical_length;
    m.state_page_tokens = o.state_page_tokens;
    // (DSpark's rings make the fixed state larger: the budget that forces preemption grows.)
    const auto model_layout =
        testing::SmallLayout(GetParam(), testing::EngineRollbackSlack(k), /*drafter=*/true);
    m.state_memory_bytes = testing::SmallestBudgetHoldingEach(
        m, reqs, 4 * model_layout.FixedBytes(),
        16 * static_cast<int64_t>(model_layout.BytesPerToken()) * 4);
    m.host_cache_bytes = 64 << 20;
    int64_t total = 0;
    for (uint32_t seed : {5u, 6u, 7u}) {
      EXPECT_EQ(Mixed(reqs, seed, m, &preemptions, nullptr, &st), alone)
          << SpeculativeMethodName(m.speculative.method) << ", seed " << seed;
      EXPECT_GT(st.spec_draft_tokens, 0);
      total += preemptions;
    }
    EXPECT_GT(total, 0) << "the budget must force preemption";
  }
}

// The n-gram drafter on every family, and the family's model drafter: DeepSeek-V4's MTP layer,
// DeepSeek-V4.1's DSpark (fixed and confidence-chosen lengths). The other family's drafter is
// refused clearly.
TEST_P(EngineSpeculativeFamilyTest, NgramAndModelDraftersGiveTheSameOutputs) {
  using Method = SpeculativeOptions::Method;
  const auto reqs = MixedRequests();
  const Results alone = Alone(reqs, Options());
  const Method model = GetParam() == Family::kV4 ? Method::kMtp : Method::kDSpark;
  const Method other = GetParam() == Family::kV4 ? Method::kDSpark : Method::kMtp;
  const auto refused = EngineCore::Create(Speculative(other, 2, false, Options()));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(GetParam() == Family::kV4 ? "DSpark" : "dspark"),
            std::string::npos)
      << refused.status().message();
  for (auto method : {Method::kNgram, model}) {
    // (DSpark's k = 0: its block, dspark_block_size.)
    for (int k : {0, 1, 3, 5}) {
      for (bool adaptive : {false, true}) {
        if (method == Method::kNgram && (k == 5 || adaptive)) continue;
        if (k == 0 && method != Method::kDSpark) continue;
        EngineStats st;
        EXPECT_EQ(
            Mixed(reqs, 3, Speculative(method, k, adaptive, Options()), nullptr, nullptr, &st),
            alone)
            << SpeculativeMethodName(method) << " k " << k << " adaptive " << adaptive;
        EXPECT_EQ(st.spec_num_tokens, k > 0 ? k : testing::SmallV41Config().dspark_block_size);
        if (method != Method::kNgram) {
          EXPECT_GT(st.spec_draft_tokens, 0);
        }
      }
    }
  }
}

// Adaptive speculation with the cost model: while drafting is measured as dearer than what it saves
// the completions draft nothing (k = 0; the MTP layer catches up on the rows it skipped when it
// drafts again, every DraftLength::kProbeEvery steps), with cheap rows and drafting they draft; the
// outputs are the same either way.
TEST(EngineSpeculativeTest, CostModelChoosesTheDraftLengthWithTheSameOutputs) {
  auto reqs = MixedRequests();
  for (auto& r : reqs) {  // long enough for probes
    r.params.max_tokens = 36;
    r.params.ignore_eos = true;
  }
  const Results alone = Alone(reqs);
  for (auto method : {SpeculativeOptions::Method::kMtp, SpeculativeOptions::Method::kNgram}) {
    for (bool dear : {true, false}) {
      EngineStats st;
      int64_t verify_steps_possible = 0;
      const auto setup = [&](EngineCore& core) {
        speculative::StepCostModel& cost = core.spec_cost();
        for (int i = 0; i < 2 * speculative::StepCostModel::kMinSteps; ++i) {
          // A step: 1 s plus 1 ms per row, so rows are nearly free next to the step; drafting
          // (dear) 100 s per token.
          cost.ObserveStep(1 + i % 4, 1.0 + 1e-3 * (1 + i % 4));
        }
        if (dear) cost.ObserveDrafting(1, 1e6);
        if (method == SpeculativeOptions::Method::kNgram) {
          core.set_drafter(OracleDrafter(reqs, alone, static_cast<int32_t>(core.vocab_size())));
        }
      };
      EXPECT_EQ(Mixed(reqs, 3, Speculative(method, 3, /*adaptive=*/true), nullptr, setup, &st),
                alone)
          << SpeculativeMethodName(method) << (dear ? " dear drafts" : " cheap drafts");
      for (const auto& [key, out] : alone)
        verify_steps_possible += static_cast<int64_t>(out.ids.size());
      if (dear) {  // only the probes drafted
        EXPECT_GT(st.spec_verify_rows, 0) << SpeculativeMethodName(method);
        EXPECT_LT(st.spec_verify_rows * speculative::DraftLength::kProbeEvery / 2,
                  verify_steps_possible)
            << SpeculativeMethodName(method);
      } else {
        EXPECT_GT(st.spec_draft_tokens, 0) << SpeculativeMethodName(method);
      }
    }
  }
}

TEST(EngineSpeculativeTest, BadOptionsAreRefused) {
  EXPECT_FALSE(EngineCore::Create(Speculative(SpeculativeOptions::Method::kNgram, 0)).ok());
  EXPECT_FALSE(EngineCore::Create(Speculative(SpeculativeOptions::Method::kNgram, 17)).ok());
  EngineOptions o = Speculative(SpeculativeOptions::Method::kNgram, 2);
  o.speculative.ngram_min = 3;
  o.speculative.ngram_max = 2;
  EXPECT_FALSE(EngineCore::Create(o).ok());
}

INSTANTIATE_TEST_SUITE_P(Families, EngineFamilyTest, ::testing::Values(Family::kV4, Family::kV41),
                         testing::FamilyParamName);
INSTANTIATE_TEST_SUITE_P(Families, EngineSpeculativeFamilyTest,
                         ::testing::Values(Family::kV4, Family::kV41), testing::FamilyParamName);

}  // namespace
}  // namespace dsinfer::engine
