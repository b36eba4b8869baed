// prompt_logprobs on the CPU engine: every prompt token after the first gets the logprob (and top
// alternatives) the sampler computes from the model's logits at the position before it — the
// same bits whether the prompt is prefilled in one chunk or many, with overlap scheduling, with
// n = 2, with a cached prefix of the prompt (which is not restored: the rows are needed), and
// after preemption (each token scored once) — and requests without it are unaffected.
#include <gtest/gtest.h>

#include "engine_mix.h"
#include "engine_test_util.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/state_layout.h"
#include "sampler/sampler.h"

namespace dsinfer::engine {
namespace {

namespace mdl = model::deepseek_v4;

// The reference: the whole prompt through the model in one forward, each row scored by the sampler.
std::vector<TokenLogprobs> Reference(const std::vector<int32_t>& prompt, int top) {
  auto model = mdl::Model::Load(testing::EngineModelDir(), {1});
  EXPECT_TRUE(model.ok());
  auto state = (*model)->NewSequence();
  auto out = (*model)->Forward({{state.get(), prompt}}, mdl::LogitsRows::kAll);
  EXPECT_TRUE(out.ok());
  const int64_t V = (*model)->config().vocab_size;
  sampler::Sampler s;
  sampler::SamplingParams p;
  std::vector<TokenLogprobs> want;
  for (size_t t = 1; t < prompt.size(); ++t) {
    sampler::SampleInput in;
    in.params = &p;
    in.forced = prompt[t];
    in.forced_top = top;
    const auto tok = s.Sample(out->logits.data() + static_cast<int64_t>(t - 1) * V, V, in);
    TokenLogprobs e{tok.id, tok.logprob, {}};
    for (const auto& a : tok.top) e.top.push_back({a.id, a.logprob});
    want.push_back(e);
  }
  return want;
}

void ExpectSame(const std::vector<TokenLogprobs>& got, const std::vector<TokenLogprobs>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < got.size(); ++t) {
    EXPECT_EQ(got[t].id, want[t].id) << what << " token " << t + 1;
    EXPECT_EQ(got[t].logprob, want[t].logprob) << what << " token " << t + 1;
    ASSERT_EQ(got[t].top.size(), want[t].top.size()) << what;
    for (size_t a = 0; a < got[t].top.size(); ++a) {
      EXPECT_EQ(got[t].top[a].id, want[t].top[a].id) << what;
      EXPECT_EQ(got[t].top[a].logprob, want[t].top[a].logprob) << what;
    }
  }
}

TEST(PromptLogprobsTest, EveryScheduleGivesTheReferenceScores) {
  const std::vector<int32_t> prompt = testing::RandomIds(150, 21);
  const auto want = Reference(prompt, 3);
  ASSERT_EQ(want.size(), 149u);
  GenerateRequest r;
  r.prompt_ids = prompt;
  r.params.max_tokens = 4;
  r.params.ignore_eos = true;
  r.params.temperature = 0;
  r.params.prompt_logprobs = 3;
  GenerateRequest plain = r;
  plain.params.prompt_logprobs = -1;
  // A request with a cached prefix of this prompt's first 128 tokens runs first (prefix cache on,
  // checkpoints every 128 tokens): the scored request must still compute every row.
  GenerateRequest warm = plain;
  warm.prompt_ids.assign(prompt.begin(), prompt.begin() + 140);
  for (int64_t budget : {int64_t{7}, int64_t{64}, int64_t{256}}) {
    for (auto overlap : {EngineOptions::Overlap::kOff, EngineOptions::Overlap::kOn}) {
      EngineOptions o = testing::SmallEngineOptions();
      o.max_batch_tokens = budget;
      o.overlap = overlap;
      o.prefix_checkpoint_interval = 128;
      auto engine = Engine::Create(o);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      (void)(*engine)->Generate({warm});
      GenerateRequest two = r;
      two.params.n = 2;
      const auto res = (*engine)->Generate({r, plain, two});
      const std::string what = "budget " + std::to_string(budget) +
                               (overlap == EngineOptions::Overlap::kOn ? " overlap" : "");
      ASSERT_TRUE(res[0].status.ok()) << res[0].status.ToString();
      ExpectSame(res[0].prompt_logprobs, want, what);
      EXPECT_TRUE(res[1].prompt_logprobs.empty()) << what;
      ExpectSame(res[2].prompt_logprobs, want, what + " n = 2");
      // The completion itself is that of the request without scoring.
      EXPECT_EQ(res[0].completions[0].ids, res[1].completions[0].ids) << what;
      EXPECT_EQ(res[2].completions[1].ids, res[1].completions[0].ids) << what;
    }
  }
}

TEST(PromptLogprobsTest, PreemptedRequestsScoreEachTokenOnce) {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(40 + 9 * i, 30 + i);
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    r.params.temperature = 0;
    r.params.prompt_logprobs = i % 3;
    reqs.push_back(r);
  }
  const auto layout =
      mdl::DeepseekV4StateLayout(testing::SmallConfig(), testing::kEngineRollbackSlack);
  EngineOptions o = testing::SmallEngineOptions();
  o.max_running = 4;
  o.typical_length = 8;
  o.state_page_tokens = 16;
  o.overlap = EngineOptions::Overlap::kOn;
  // The smallest budget that holds each request alone: several at once outgrow it.
  o.state_memory_bytes = testing::SmallestBudgetHoldingEach(
      o, reqs, 4 * layout.FixedBytes(), 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4);
  ASSERT_GT(o.state_memory_bytes, 0);
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto res = (*engine)->Generate(reqs);
  EXPECT_GT((*engine)->Stats().preemptions, 0) << "the budget must force preemption";
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(res[i].status.ok()) << i << ": " << res[i].status.ToString();
    ExpectSame(res[i].prompt_logprobs,
               Reference(reqs[i].prompt_ids, reqs[i].params.prompt_logprobs),
               "request " + std::to_string(i));
  }
}

TEST(PromptLogprobsTest, OutOfRangeIsRefused) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  GenerateRequest r;
  r.prompt_ids = {1, 2, 3};
  r.params.prompt_logprobs = 21;
  EXPECT_EQ((*engine)->Submit(r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer::engine
