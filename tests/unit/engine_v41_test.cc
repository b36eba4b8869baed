// DeepSeek-V4.1 through the engine (the model-family seam, its state in the cache's pages) gives
// exactly what the standalone model gives on the golden path — a fresh heap state, the prompt in
// one forward, then one token per forward, each token drawn by the sampler from those logits with
// the request's keys (seed, position, completion index) — bit for bit (ids, logprobs and top
// logprobs), whatever the step budget (chunked prefill), the requests beside it (batch
// invariance), preemption and recomputation, n = 2 forks, a prefix-cache hit or speculative
// decoding with rollback. The model is golden_v41 config A (tests/data/golden_v41/A), whose
// standalone logits match the transformers reference (golden_v41_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/public_types.h"
#include "engine_mix.h"
#include "engine_test_util.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/init_presets.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/state_layout.h"
#include "model_test_util.h"
#include "sampler/sampler.h"

namespace dsinfer {
namespace {

namespace v41 = model::deepseek_v41;
using testing::kGoldenV41ModelA;

// `count` requests sharing a 140-token prefix (past a 128-token checkpoint), request i with
// first_extra + extra_step * i tokens of its own after it; temperature 0 and 0.8 alternating,
// seeds seed0 + i, logprobs on, `max_tokens` each (ignore_eos). Ids drawn from rng(rng_seed).
std::vector<GenerateRequest> SharedPrefixRequests(uint32_t rng_seed, int count, int first_extra,
                                                  int extra_step, int max_tokens, uint64_t seed0) {
  std::mt19937 rng(rng_seed);
  std::vector<int32_t> shared(140);
  for (auto& id : shared) id = 2 + static_cast<int32_t>(rng() % 300);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerateRequest r;
    r.prompt_ids = shared;
    for (int t = 0; t < first_extra + extra_step * i; ++t)
      r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % 300));
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.logprobs = true;
    r.params.temperature = i % 2 ? 0.8f : 0.0f;
    r.params.seed = seed0 + i;
    reqs.push_back(r);
  }
  return reqs;
}

// The golden path for each completion of `r`, the draws keyed by `seed` (the engine's seed for the
// request: r.params.seed when set).
RequestResult Reference(v41::Model& model, const GenerateRequest& r, uint64_t seed) {
  const sampler::SamplingParams params = engine::ToSamplerParams(r.params);
  const int64_t vocab = model.config().vocab_size;
  sampler::Sampler sampler;
  RequestResult result;
  result.completions.resize(static_cast<size_t>(r.params.n));
  for (int index = 0; index < r.params.n; ++index) {
    Completion& c = result.completions[static_cast<size_t>(index)];
    auto state = model.NewSequence(/*rollback_slack=*/0);
    auto logits = model.Forward({{state.get(), r.prompt_ids}}, v41::LogitsRows::kLast);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    if (!logits.ok()) return result;
    sampler::TokenHistory history(r.prompt_ids);
    for (int k = 0; k < r.params.max_tokens; ++k) {
      sampler::SampleInput in;
      in.params = &params;
      in.history = &history;
      in.seed = seed;
      in.sample_index = static_cast<uint32_t>(index);
      in.position = static_cast<int64_t>(r.prompt_ids.size()) + k;
      in.eos_id = static_cast<int32_t>(model.config().eos_token_id);
      const sampler::SampledToken t = sampler.Sample(logits->data(), vocab, in);
      c.ids.push_back(t.id);
      c.logprobs.push_back({t.id, t.logprob, engine::ToPublicLogprobs(t.top)});
      history.AddOutput(t.id);
      if (k + 1 == r.params.max_tokens) break;
      logits = model.Forward({{state.get(), {t.id}}}, v41::LogitsRows::kLast);
      EXPECT_TRUE(logits.ok()) << logits.status().ToString();
      if (!logits.ok()) return result;
    }
  }
  return result;
}

class EngineV41Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = v41::Model::Load(kGoldenV41ModelA, {2});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() { delete model_; }

  // The golden mix (greedy and seeded sampling, top-p, n = 2, logprobs, top logprobs), each with
  // a seed (greedy draws do not use it), and its references.
  static std::vector<GenerateRequest> Requests(int count) {
    std::vector<GenerateRequest> reqs = testing::Mix(count);
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!reqs[i].params.seed) reqs[i].params.seed = 500 + i;
    }
    return reqs;
  }
  static std::vector<RequestResult> References(const std::vector<GenerateRequest>& reqs) {
    std::vector<RequestResult> refs;
    for (const auto& r : reqs) refs.push_back(Reference(*model_, r, *r.params.seed));
    return refs;
  }
  static EngineOptions Options(int64_t batch_tokens, int max_running = 16) {
    return testing::MixOptions(Device::kCpu, max_running, batch_tokens, int64_t{64} << 20,
                               kGoldenV41ModelA);
  }

  static v41::Model* model_;
};
v41::Model* EngineV41Test::model_ = nullptr;

TEST_F(EngineV41Test, EveryBudgetAndBatchGivesTheStandaloneModelsTokens) {
  const auto reqs = Requests(16);
  const auto want = References(reqs);
  for (int64_t budget : {int64_t{3}, int64_t{17}, int64_t{256}}) {
    auto e = Engine::Create(Options(budget));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    testing::ExpectSame(want, e.value()->Generate(reqs), "budget " + std::to_string(budget));
    const EngineStats st = e.value()->Stats();
    EXPECT_EQ(st.state_bytes_used, 0);
  }
  // One request at a time: the same bits alone as in a batch.
  auto e = Engine::Create(Options(64, /*max_running=*/1));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  testing::ExpectSame(want, e.value()->Generate(reqs), "one request at a time");
}

// Random arrivals, a random budget every step, overlap scheduling on and off.
TEST_F(EngineV41Test, RandomArrivalsAndBudgetsGiveTheStandaloneModelsTokens) {
  const auto reqs = Requests(12);
  const auto want = References(reqs);
  for (auto overlap : {EngineOptions::Overlap::kOff, EngineOptions::Overlap::kOn}) {
    EngineOptions o = Options(64);
    o.overlap = overlap;
    auto made = engine::EngineCore::Create(o);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    engine::EngineCore& core = *made.value();
    std::mt19937 rng(7);
    std::vector<int> arrive(reqs.size());
    for (auto& a : arrive) a = static_cast<int>(rng() % 10);
    const auto got = testing::Drain(
        core,
        [&](int step) {
          for (size_t i = 0; i < reqs.size(); ++i) {
            if (arrive[i] != step) continue;
            auto p = core.Prepare(reqs[i]);
            ASSERT_TRUE(p.ok()) << p.status().ToString();
            core.Add(i + 1, *p);
          }
          core.scheduler().set_max_batch_tokens(1 + rng() % 40);
        },
        /*min_steps=*/10);
    for (size_t i = 0; i < reqs.size(); ++i) {
      for (size_t c = 0; c < want[i].completions.size(); ++c) {
        const testing::Outcome& g = got.at({i + 1, static_cast<int>(c)});
        EXPECT_EQ(g.ids, want[i].completions[c].ids) << "request " << i << " completion " << c;
        std::vector<float> lp;
        for (const auto& t : want[i].completions[c].logprobs) lp.push_back(t.logprob);
        EXPECT_EQ(g.logprobs, lp) << "request " << i << " completion " << c;
      }
    }
    EXPECT_EQ(core.num_states(), 0u);
  }
}

TEST_F(EngineV41Test, PreemptionAndRecomputationGiveTheStandaloneModelsTokens) {
  const auto reqs = Requests(12);
  const auto want = References(reqs);
  auto config = io::LoadDeepseekV41Config(kGoldenV41ModelA);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const cache::StateLayout layout = v41::DeepseekV41StateLayout(*config, 0);
  EngineOptions o = Options(24, /*max_running=*/4);
  o.typical_length = 8;
  o.state_page_tokens = 16;
  o.prefix_cache = false;
  o.state_memory_bytes = testing::SmallestBudgetHoldingEach(
      o, reqs, 4 * layout.FixedBytes(), 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4);
  ASSERT_GT(o.state_memory_bytes, 0);
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  testing::ExpectSame(want, e.value()->Generate(reqs), "preemption");
  EXPECT_GT(e.value()->Stats().preemptions, 0) << "the budget must force preemption";
}

TEST_F(EngineV41Test, PrefixCacheHitGivesTheColdRunsTokens) {
  // Requests sharing a 140-token prefix (past the 128-token checkpoint), one after the other: the
  // later ones restore the first one's checkpoint and prefill only the rest.
  std::vector<GenerateRequest> reqs = SharedPrefixRequests(3, 4, 5, 7, 12, 90);
  reqs[3].params.n = 2;
  const auto want = References(reqs);
  EngineOptions o = Options(48);
  o.prefix_cache = true;
  o.prefix_checkpoint_interval = 128;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<RequestResult> got;
  for (const auto& r : reqs) got.push_back(e.value()->Generate({r}).front());
  testing::ExpectSame(want, got, "prefix cache");
  const EngineStats st = e.value()->Stats();
  EXPECT_GE(st.prefix_hits, 3);
  EXPECT_GE(st.prefix_tokens_reused, 3 * 128);
}

// n-gram drafts verified in one step, the rejected ones rolled back (V4.1's rings by position and
// entry lists truncated to floor(length / ratio)): the standalone model's tokens.
TEST_F(EngineV41Test, SpeculativeDecodingGivesTheStandaloneModelsTokens) {
  // Repetitive prompts, so that the n-gram lookup proposes drafts.
  std::vector<GenerateRequest> reqs = Requests(8);
  for (auto& r : reqs) {
    const std::vector<int32_t> head(
        r.prompt_ids.begin(), r.prompt_ids.begin() + std::min<size_t>(6, r.prompt_ids.size()));
    for (int rep = 0; rep < 4; ++rep)
      r.prompt_ids.insert(r.prompt_ids.end(), head.begin(), head.end());
  }
  const auto want = References(reqs);
  for (int k : {1, 4}) {
    EngineOptions o = Options(64);
    o.speculative.method = SpeculativeOptions::Method::kNgram;
    o.speculative.num_tokens = k;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    testing::ExpectSame(want, e.value()->Generate(reqs), "n-gram k " + std::to_string(k));
    EXPECT_GT(e.value()->Stats().spec_draft_tokens, 0);
  }
}

TEST_F(EngineV41Test, UnsupportedPathsAreRefusedClearly) {
  EngineOptions o = Options(64);
  o.speculative.method = SpeculativeOptions::Method::kMtp;
  o.speculative.num_tokens = 2;
  auto mtp = Engine::Create(o);
  ASSERT_FALSE(mtp.ok());
  EXPECT_EQ(mtp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mtp.status().message().find("DSpark"), std::string::npos) << mtp.status().message();
  // --device auto takes the CPU without a visible GPU (the CUDA path: tests/gpu).
  o = Options(64);
  o.device = Device::kAuto;
  auto any = Engine::Create(o);
  ASSERT_TRUE(any.ok()) << any.status().ToString();
}

// A V4.1 model with a vision config (its tower not built): a prompt holding the image token is
// refused at admission (the other requests of the batch run), and the token is never drawn, even
// with a logit bias of +100 on it (it would otherwise be every greedy draw).
TEST(EngineV41VisionTest, ImageTokensAreRefusedAtAdmissionAndNeverDrawn) {
  io::DeepseekV41Config c = testing::SmallV41Config();
  c.has_vision = true;
  c.image_token_id = 299;
  const std::string dir = testing::ScratchDir("model_v41_vision");
  ASSERT_TRUE(v41::WriteRandomModel(c, dir, 5).ok());
  auto e = Engine::Create(testing::MixOptions(Device::kCpu, 4, 64, int64_t{64} << 20, dir));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  GenerateRequest image;
  image.prompt_ids = {5, 299, 7};
  image.params.max_tokens = 4;
  GenerateRequest biased;
  biased.prompt_ids = {5, 6, 7};
  biased.params.max_tokens = 12;
  biased.params.temperature = 0;
  biased.params.ignore_eos = true;
  biased.params.logit_bias[299] = 100.0f;
  GenerateRequest sampled = biased;
  sampled.params.temperature = 1.0f;
  sampled.params.seed = 3;
  const auto out = (*e)->Generate({image, biased, sampled});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].status.code(), StatusCode::kInvalidArgument);
  // Refused by the engine's admission (not by a failed forward, which would fail the batch).
  EXPECT_NE(out[0].status.message().find("the prompt holds token id 299"), std::string::npos)
      << out[0].status.message();
  for (int i : {1, 2}) {
    ASSERT_TRUE(out[i].status.ok()) << out[i].status.ToString();
    const auto& ids = out[i].completions[0].ids;
    EXPECT_EQ(ids.size(), 12u);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 299), 0) << "request " << i;
  }
}

// The Engram n-gram memory through the engine (v41-tiny-engram with a 320-id vocabulary, random
// weights): its look-back lives in the sequence state's token ring, so every step budget and
// batch, the prefix cache on and off (a hit restores a checkpoint's ring) and n-gram speculation
// (the ring rolled back with the rejected drafts) give the standalone model's tokens.
class EngineV41EngramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::SmallV41EngramModelDir("engine_v41_engram"));
    auto m = v41::Model::Load(*dir_, {2});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }
  static std::vector<GenerateRequest> Requests(int count) {
    std::vector<GenerateRequest> reqs = testing::Mix(count);
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!reqs[i].params.seed) reqs[i].params.seed = 700 + i;
    }
    return reqs;
  }
  static std::vector<RequestResult> References(const std::vector<GenerateRequest>& reqs) {
    std::vector<RequestResult> refs;
    for (const auto& r : reqs) refs.push_back(Reference(*model_, r, *r.params.seed));
    return refs;
  }
  static EngineOptions Options(int64_t batch_tokens, int max_running = 16) {
    return testing::MixOptions(Device::kCpu, max_running, batch_tokens, int64_t{64} << 20, *dir_);
  }

  static std::string* dir_;
  static v41::Model* model_;
};
std::string* EngineV41EngramTest::dir_ = nullptr;
v41::Model* EngineV41EngramTest::model_ = nullptr;

TEST_F(EngineV41EngramTest, EveryBudgetBatchAndPrefixCacheSettingGivesTheStandaloneModelsTokens) {
  const auto reqs = Requests(10);
  const auto want = References(reqs);
  for (int64_t budget : {int64_t{3}, int64_t{17}, int64_t{256}}) {
    for (bool prefix : {false, true}) {
      EngineOptions o = Options(budget);
      o.prefix_cache = prefix;
      auto e = Engine::Create(o);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      testing::ExpectSame(want, e.value()->Generate(reqs),
                          "budget " + std::to_string(budget) + (prefix ? " prefix cache" : ""));
    }
  }
  auto e = Engine::Create(Options(64, /*max_running=*/1));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  testing::ExpectSame(want, e.value()->Generate(reqs), "one request at a time");
}

TEST_F(EngineV41EngramTest, PrefixCacheHitGivesTheColdRunsTokens) {
  // A shared 140-token prefix past a 128-token checkpoint: later requests restore it (with its
  // token ring) and prefill only the rest.
  const std::vector<GenerateRequest> reqs = SharedPrefixRequests(5, 3, 3, 5, 8, 40);
  const auto want = References(reqs);
  for (bool prefix : {false, true}) {
    EngineOptions o = Options(32);
    o.prefix_cache = prefix;
    o.prefix_checkpoint_interval = 128;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<RequestResult> got;
    for (const auto& r : reqs) got.push_back(e.value()->Generate({r}).front());
    testing::ExpectSame(want, got, prefix ? "prefix cache" : "no prefix cache");
    const EngineStats st = e.value()->Stats();
    if (prefix) {
      EXPECT_GE(st.prefix_hits, 2);
      EXPECT_GE(st.prefix_tokens_reused, 2 * 128);
    } else {
      EXPECT_EQ(st.prefix_hits, 0);
    }
  }
}

TEST_F(EngineV41EngramTest, SpeculativeDecodingGivesTheStandaloneModelsTokens) {
  std::vector<GenerateRequest> reqs = Requests(6);
  for (auto& r : reqs) {
    const std::vector<int32_t> head(
        r.prompt_ids.begin(), r.prompt_ids.begin() + std::min<size_t>(6, r.prompt_ids.size()));
    for (int rep = 0; rep < 4; ++rep)
      r.prompt_ids.insert(r.prompt_ids.end(), head.begin(), head.end());
  }
  const auto want = References(reqs);
  EngineOptions o = Options(64);
  o.speculative.method = SpeculativeOptions::Method::kNgram;
  o.speculative.num_tokens = 3;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  testing::ExpectSame(want, e.value()->Generate(reqs), "n-gram k 3");
  EXPECT_GT(e.value()->Stats().spec_draft_tokens, 0);
}

}  // namespace
}  // namespace dsinfer
