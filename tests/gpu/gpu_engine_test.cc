// The engine on the GPU (EngineOptions::device = kCuda, the CUDA ModelRunner): a request's ids and
// logprobs are bitwise the same when it runs alone (max_running 1) and inside a mix of many
// requests of different lengths — greedy and seeded sampling, n > 1, step token budgets from 7 to
// 4,096, preemption forced by a small state budget, decode steps replayed from CUDA graphs or
// launched eagerly, the FP8 cache's packed state — and do not depend on what ran before in the
// process; and the GPU engine gives the CPU engine's greedy ids. Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../unit/engine_mix.h"
#include "../unit/model_test_util.h"
#include "backend/cuda/runtime.h"
#include "base/check.h"
#include "dsinfer/engine.h"
#include "engine/engine_core.h"
#include "io/model_config.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/init_presets.h"

namespace dsinfer {
namespace {

EngineOptions Options(int max_running, int64_t batch_tokens, int64_t state_bytes) {
  return testing::MixOptions(Device::kCuda, max_running, batch_tokens, state_bytes);
}

using testing::ExpectSame;
using testing::Mix;

// Eight running, 16-token pages and rings planned for short requests, and the smallest state
// budget (in steps of 16 tokens of four sequences, over the rings of the eight) that holds every
// request of `reqs` alone: the running ones outgrow it, so requests are preempted.
EngineOptions PreemptingOptions(const std::vector<GenerateRequest>& reqs) {
  auto config = io::LoadDeepseekV4Config(testing::kGoldenModelA);
  DSINFER_CHECK(config.ok());  // a committed golden model
  const auto layout = model::deepseek_v4::cuda::CudaModel::StateLayoutFor(*config);
  EngineOptions o = Options(8, 256, 0);
  o.typical_length = 8;
  o.state_page_tokens = 16;
  o.state_memory_bytes = testing::SmallestBudgetHoldingEach(
      o, reqs, 8 * layout.FixedBytes(), 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4);
  return o;
}
const std::string& kModel = testing::kGoldenModelA;

TEST(GpuEngineTest, RequestsAreTheSameAloneAndInAnyMix) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::vector<GenerateRequest> reqs = Mix(64);
  // Alone: one sequence at a time (n > 1 siblings still fork from their prompt).
  std::vector<RequestResult> alone;
  {
    auto e = Engine::Create(Options(2, 4096, int64_t{256} << 20));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ((*e)->device(), "cuda");
    for (const auto& r : reqs) alone.push_back((*e)->Generate({r})[0]);
  }
  for (int64_t budget : {int64_t{7}, int64_t{64}, int64_t{4096}}) {
    auto e = Engine::Create(Options(32, budget, int64_t{256} << 20));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ExpectSame(alone, (*e)->Generate(reqs), "budget " + std::to_string(budget));
    EXPECT_GT((*e)->Stats().graph_decode_steps, 0);
  }
  {  // decode steps launched eagerly instead of replaying graphs (the default)
    EngineOptions o = Options(32, 64, int64_t{256} << 20);
    o.enforce_eager = true;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ExpectSame(alone, (*e)->Generate(reqs), "enforce_eager");
    EXPECT_EQ((*e)->Stats().graph_decode_steps, 0);
  }
  {  // steps run serially instead of overlapping the host's work with the GPU's (the default)
    EngineOptions o = Options(32, 64, int64_t{256} << 20);
    o.overlap = EngineOptions::Overlap::kOff;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_FALSE((*e)->Stats().overlap);
    ExpectSame(alone, (*e)->Generate(reqs), "no overlap");
  }
  // Preemption, as the CPU engine's test (PreemptingOptions).
  {
    EngineOptions o = PreemptingOptions(reqs);
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const auto mixed = (*e)->Generate(reqs);
    ExpectSame(alone, mixed, "budget " + std::to_string(o.state_memory_bytes) + " bytes");
    EXPECT_GT((*e)->Stats().preemptions, 0) << "the budget must force preemption";
  }
  // What ran before does not matter: the first request again, last, in a used engine.
  {
    auto e = Engine::Create(Options(32, 64, int64_t{256} << 20));
    ASSERT_TRUE(e.ok());
    (void)(*e)->Generate(reqs);
    ExpectSame({alone[0], alone[1]}, (*e)->Generate({reqs[0], reqs[1]}), "after other work");
  }
}

// DeepSeek-V4 with the FP8 cache on the GPU engine: the paged state's pages hold the packed rows
// (fp8_ds_mla K=V rows, e2m1 index keys; a model whose dims pack), and a request has the same bits
// alone and inside a mix at step budgets of 7 and 4,096 tokens.
TEST(GpuEngineTest, Fp8CacheRequestsAreTheSameAloneAndInAnyMix) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::ScratchDir("gpu_engine_fp8_cache");
  ASSERT_TRUE(model::deepseek_v4::WriteRandomModel(testing::SmallFp8CacheConfig(), dir, 23,
                                                   model::deepseek_v4::WeightFormat::kF32)
                  .ok());
  std::vector<GenerateRequest> reqs = Mix(32);  // its ids reach 301: folded into the vocabulary
  const int32_t vocab = static_cast<int32_t>(testing::SmallFp8CacheConfig().vocab_size);
  for (auto& r : reqs)
    for (int32_t& id : r.prompt_ids) id %= vocab;
  auto options = [&](int max_running, int64_t budget) {
    EngineOptions o =
        testing::MixOptions(Device::kCuda, max_running, budget, int64_t{256} << 20, dir);
    o.kv_cache_dtype = "fp8";
    return o;
  };
  std::vector<RequestResult> alone;
  {
    auto e = Engine::Create(options(2, 4096));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    for (const auto& r : reqs) alone.push_back((*e)->Generate({r})[0]);
  }
  for (int64_t budget : {int64_t{7}, int64_t{4096}}) {
    auto e = Engine::Create(options(32, budget));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ExpectSame(alone, (*e)->Generate(reqs), "fp8 cache, budget " + std::to_string(budget));
  }
}

// The GPU engine (paged device state, device sampler) against the CPU engine, the reference, on the
// fp32 golden model: the same greedy ids, and logprobs within float rounding of the two backends'
// logits (~1e-6 relative), for prompts that span several state pages and n > 1 forks.
// tol / min_close: each logprob within tol, and at least min_close of them within 1e-4.
void ExpectCpuEngineIds(const std::string& model, double tol = 1e-4, double min_close = 1.0) {
  std::vector<GenerateRequest> reqs = Mix(24);
  for (auto& r : reqs) {
    r.params.temperature = 0;
    r.params.n = 1;
    r.params.top_logprobs = 2;
  }
  reqs[0].prompt_ids.assign(200, 7);  // many pages of every list pool
  reqs[1].params.n = 3;               // forked siblings (greedy: all three equal)
  EngineOptions cpu = testing::MixOptions(Device::kCpu, 8, 256, int64_t{64} << 20, model);
  auto ec = Engine::Create(cpu);
  auto eg = Engine::Create(testing::MixOptions(Device::kCuda, 8, 256, int64_t{64} << 20, model));
  ASSERT_TRUE(ec.ok()) << ec.status().ToString();
  ASSERT_TRUE(eg.ok()) << eg.status().ToString();
  const auto want = (*ec)->Generate(reqs), got = (*eg)->Generate(reqs);
  int64_t logprobs = 0, close = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(want[i].status.ok() && got[i].status.ok()) << i;
    ASSERT_EQ(want[i].completions.size(), got[i].completions.size());
    for (size_t c = 0; c < want[i].completions.size(); ++c) {
      const Completion &x = want[i].completions[c], &y = got[i].completions[c];
      EXPECT_EQ(x.ids, y.ids) << "request " << i << " completion " << c;
      for (size_t t = 0; t < std::min(x.logprobs.size(), y.logprobs.size()); ++t) {
        EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, tol) << i << "/" << t;
        ++logprobs;
        close += std::abs(x.logprobs[t].logprob - y.logprobs[t].logprob) <= 1e-4;
      }
    }
  }
  std::printf("%s: %lld of %lld logprobs within 1e-4 of the CPU engine's\n", model.c_str(),
              static_cast<long long>(close), static_cast<long long>(logprobs));
  EXPECT_GT(logprobs, 100);
  EXPECT_GE(static_cast<double>(close), min_close * static_cast<double>(logprobs));
}

TEST(GpuEngineTest, GreedyIdsAndLogprobsMatchTheCpuEngine) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  ExpectCpuEngineIds(kModel);
}

// DeepSeek-V4.1 on the GPU engine: its golden model A (CSA2, KV sharing, the two-level indexer)
// and the v41-tiny-engram model (Engram: the look-back ring in the paged state; random fp32
// weights, the Mix's 320 ids) give the CPU engine's greedy ids, a request the same bits alone and
// in any mix (the Engram tables in device or host memory), and speculation (oracle and n-gram
// drafts) changes nothing.
const std::string& V41EngramModel() {
  static const std::string dir = testing::SmallV41EngramModelDir("gpu_engine_v41_engram");
  return dir;
}

// The greedy ids are the CPU engine's; a logprob moves where the two backends' ulp-level
// differences flip an FP8 / FP4 rounding of a cache row or reorder a near-tie in the indexer's
// top-k over FP4 keys (the 200-token prompt of one repeated id makes many), from then on in that
// sequence, but most stay within 1e-4 of the CPU's (measured on the H100: golden A 502 of 505,
// the Engram model 457 of 505, the largest move 0.18).
TEST(GpuEngineTest, V41GreedyIdsMatchTheCpuEngine) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  ExpectCpuEngineIds(testing::kGoldenV41ModelA, 0.5, 0.98);
  ExpectCpuEngineIds(V41EngramModel(), 0.5, 0.85);
}

TEST(GpuEngineTest, V41RequestsAreTheSameAloneAndInAnyMix) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& model : {testing::kGoldenV41ModelA, V41EngramModel()}) {
    const std::vector<GenerateRequest> reqs = Mix(32);
    std::vector<RequestResult> alone;
    {
      auto e =
          Engine::Create(testing::MixOptions(Device::kCuda, 2, 4096, int64_t{256} << 20, model));
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      for (const auto& r : reqs) alone.push_back((*e)->Generate({r})[0]);
    }
    for (int64_t budget : {int64_t{7}, int64_t{4096}}) {
      EngineOptions o = testing::MixOptions(Device::kCuda, 32, budget, int64_t{256} << 20, model);
      o.engram_host_tables = budget == 7;  // the Engram tables in host memory: the same bits
      auto e = Engine::Create(o);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      ExpectSame(alone, (*e)->Generate(reqs), model + " budget " + std::to_string(budget));
      EXPECT_GT((*e)->Stats().graph_decode_steps, 0);
    }
  }
}

TEST(GpuEngineTest, V41SpeculationIsExact) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::ExpectSpeculationExact(Device::kCuda, testing::kGoldenV41ModelA);
  testing::ExpectSpeculationExact(Device::kCuda, V41EngramModel());
}

// DSpark speculative decoding on the GPU (the CUDA model's drafter: its context rings in the
// paged state, written by every forward, decode and verify steps replayed from graphs): every
// request's ids and logprobs equal the run without speculation, at a small budget (verify steps
// beside prefill chunks), a large one with the confidence-chosen lengths, and eagerly; on the
// Engram preset (which carries a drafter) and the golden config D.
TEST(GpuEngineTest, V41DSparkIsExact) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string golden_d = std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden_v41/D";
  for (const std::string& model : {V41EngramModel(), golden_d}) {
    const std::vector<GenerateRequest> reqs = Mix(32);
    std::vector<RequestResult> want;
    {
      auto e =
          Engine::Create(testing::MixOptions(Device::kCuda, 16, 256, int64_t{256} << 20, model));
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      want = (*e)->Generate(reqs);
    }
    struct Run {
      int64_t budget;
      bool adaptive, eager;
    };
    for (const Run& run : {Run{24, false, false}, Run{256, true, false}, Run{24, false, true}}) {
      EngineOptions o =
          testing::MixOptions(Device::kCuda, 16, run.budget, int64_t{256} << 20, model);
      o.speculative.method = SpeculativeOptions::Method::kDSpark;
      o.speculative.num_tokens = 5;
      o.speculative.adaptive = run.adaptive;
      o.enforce_eager = run.eager;
      auto e = Engine::Create(o);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      const std::string what = model + ", budget " + std::to_string(run.budget) +
                               (run.adaptive ? ", adaptive" : "") + (run.eager ? ", eager" : "");
      ExpectSame(want, (*e)->Generate(reqs), what);
      const EngineStats st = (*e)->Stats();
      EXPECT_GT(st.spec_draft_tokens, 0) << what;
      std::printf("%s: %lld of %lld drafts accepted\n", what.c_str(),
                  static_cast<long long>(st.spec_accepted_tokens),
                  static_cast<long long>(st.spec_draft_tokens));
      if (!run.eager) {
        EXPECT_GT(st.graph_multi_token_steps, 0) << what;
        EXPECT_GT(st.graph_draft_passes, 0) << what;
      } else {
        EXPECT_EQ(st.graph_draft_passes, 0) << what;
      }
    }
  }
}

// Overlap scheduling on the GPU (the default): fed tokens read from the device sampler's output,
// stop strings and ids, n > 1 forks and aborts give the outputs of the serial loop.
TEST(GpuEngineTest, OverlapSchedulingGivesTheSameIdsAndLogprobs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::ExpectOverlapExact(Device::kCuda);
}

// prompt_logprobs on the GPU (scoring draws on the device sampler, every row's logits kept):
// the CPU engine's scores within float rounding of the two backends' logits, the same ids, and
// refused with a clear error on a GPU engine without --enable-prompt-logprobs.
TEST(GpuEngineTest, PromptLogprobsMatchTheCpuEngine) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::vector<GenerateRequest> reqs = Mix(6);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].params.temperature = 0;
    reqs[i].params.prompt_logprobs = static_cast<int>(i % 3);
  }
  reqs[0].prompt_ids.assign(150, 9);  // several chunks at the budget below
  EngineOptions cpu = Options(8, 64, int64_t{64} << 20);
  cpu.device = Device::kCpu;
  EngineOptions gpu = Options(8, 64, int64_t{64} << 20);
  gpu.prompt_logprobs = true;
  auto ec = Engine::Create(cpu);
  auto eg = Engine::Create(gpu);
  ASSERT_TRUE(ec.ok() && eg.ok());
  const auto want = (*ec)->Generate(reqs), got = (*eg)->Generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(want[i].status.ok() && got[i].status.ok()) << i << got[i].status.ToString();
    ASSERT_EQ(got[i].prompt_logprobs.size(), reqs[i].prompt_ids.size() - 1) << i;
    ASSERT_EQ(want[i].prompt_logprobs.size(), got[i].prompt_logprobs.size()) << i;
    for (size_t t = 0; t < got[i].prompt_logprobs.size(); ++t) {
      EXPECT_EQ(got[i].prompt_logprobs[t].id, reqs[i].prompt_ids[t + 1]);
      EXPECT_NEAR(got[i].prompt_logprobs[t].logprob, want[i].prompt_logprobs[t].logprob, 1e-4)
          << i << "/" << t;
      EXPECT_EQ(got[i].prompt_logprobs[t].top.size(), static_cast<size_t>(i % 3));
    }
    EXPECT_EQ(got[i].completions[0].ids, want[i].completions[0].ids) << i;
  }
  auto plain = Engine::Create(Options(8, 64, int64_t{64} << 20));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Submit(reqs[1]).status().code(), StatusCode::kInvalidArgument);
}

// Speculative decoding on the GPU: verify chunks draw at each of their last k + 1 rows on the
// device and rejected drafts roll back by starting the next chunk at the kept length.
TEST(GpuEngineTest, SpeculativeDecodingGivesTheSameIdsAndLogprobs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::ExpectSpeculationExact(Device::kCuda);
}

// MTP drafting on the GPU (the CUDA model's MTP layer, run inside every forward one position
// behind the main model and chained by DraftMtp): with every rollback its drafts cause, at a small
// budget (verify steps beside prefill chunks, one-token prompts whose first step has no MTP row),
// a large one, eagerly and under preemption, every request's ids and logprobs equal the run
// without speculation. A model of the tiny preset (with its MTP layer) and 320 ids, for Mix().
TEST(GpuEngineTest, MtpSpeculationGivesTheSameIdsAndLogprobs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  static const std::string model = [] {
    const std::string dir = testing::ScratchDir("model_gpu_mtp");
    auto c = testing::SmallConfig();
    c.vocab_size = 320;
    auto st =
        model::deepseek_v4::WriteRandomModel(c, dir, 5, model::deepseek_v4::WeightFormat::kF32);
    if (!st.ok()) throw std::runtime_error(st.ToString());
    return dir;
  }();
  const std::vector<GenerateRequest> reqs = Mix(32);
  std::vector<RequestResult> want;
  {
    auto e = Engine::Create(testing::MixOptions(Device::kCuda, 16, 256, int64_t{256} << 20, model));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    want = (*e)->Generate(reqs);
  }
  struct Run {
    int64_t budget;
    bool eager;
    int max_running;
    int64_t state_bytes;
  };
  for (const Run& run :
       {Run{24, false, 16, int64_t{256} << 20}, Run{256, false, 16, int64_t{256} << 20},
        Run{24, true, 16, int64_t{256} << 20}, Run{64, false, 6, int64_t{3} << 20}}) {
    EngineOptions o =
        testing::MixOptions(Device::kCuda, run.max_running, run.budget, run.state_bytes, model);
    o.speculative.method = SpeculativeOptions::Method::kMtp;
    o.speculative.num_tokens = 3;
    o.enforce_eager = run.eager;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const std::string what = "MTP k=3, budget " + std::to_string(run.budget) +
                             (run.eager ? ", eager" : "") + ", state " +
                             std::to_string(run.state_bytes >> 20) + " MiB";
    ExpectSame(want, (*e)->Generate(reqs), what);
    const EngineStats st = (*e)->Stats();
    EXPECT_GT(st.spec_draft_tokens, 0) << what;
    EXPECT_EQ(st.graph_multi_token_steps > 0, !run.eager) << what;
  }
}

// The prefix cache on the GPU: requests sharing a 130-token prefix and a chat's next turn restore
// cached states (page copies on the device, of the pages not shared copy-on-write) and compute the
// rest; every output equals the run with the cache off, and with every page copied.
TEST(GpuEngineTest, PrefixCacheGivesColdRunOutputs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::vector<GenerateRequest> reqs = Mix(8);  // the golden model's context is 256 tokens
  std::vector<int32_t> base;
  for (int t = 0; t < 130; ++t) base.push_back(2 + (t * 37) % 290);
  for (auto& r : reqs) {
    r.prompt_ids.resize(std::min<size_t>(r.prompt_ids.size(), 40));
    r.prompt_ids.insert(r.prompt_ids.begin(), base.begin(), base.end());
    r.params.max_tokens = std::min(r.params.max_tokens, 16);
  }
  EngineOptions off = Options(8, 64, int64_t{256} << 20);
  off.prefix_cache = false;
  auto cold = Engine::Create(off);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  const RequestResult first = (*cold)->Generate({reqs[0]})[0];
  GenerateRequest turn = reqs[0];
  turn.prompt_ids.insert(turn.prompt_ids.end(), first.completions[0].ids.begin(),
                         first.completions[0].ids.end());
  turn.prompt_ids.insert(turn.prompt_ids.end(), {5, 6, 7, 8});
  reqs.insert(reqs.begin() + 1, turn);  // right after its first turn (older states are evicted)
  std::vector<RequestResult> want;
  for (const auto& r : reqs) want.push_back((*cold)->Generate({r})[0]);
  EngineOptions on = Options(8, 64, int64_t{256} << 20);
  on.prefix_checkpoint_interval = 128;
  auto warm = Engine::Create(on);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  std::vector<RequestResult> got;
  for (const auto& r : reqs) got.push_back((*warm)->Generate({r})[0]);
  ExpectSame(want, got, "prefix cache");
  const EngineStats st = (*warm)->Stats();
  // Every admission but the first request's found a state (an n = 2 sibling that could not fork
  // at once is admitted, and hits, on its own).
  EXPECT_GE(st.prefix_queries, static_cast<int64_t>(reqs.size()));
  EXPECT_EQ(st.prefix_hits, st.prefix_queries - 1);
  // The turn restores its first turn's state at the end of the answer, the others the shared 128.
  EXPECT_GE(st.prefix_tokens_reused,
            7 * 128 +
                static_cast<int64_t>(reqs[0].prompt_ids.size() + first.completions[0].ids.size()) -
                1);
  // The cached states share the common prefix's list pages (copy-on-write: the runner copies only
  // the pages it does not share); copying every page instead gives the same outputs.
  EXPECT_GT(st.state_bytes_shared, 0);
  on.share_state_pages = false;
  auto copying = Engine::Create(on);
  ASSERT_TRUE(copying.ok()) << copying.status().ToString();
  std::vector<RequestResult> copied;
  for (const auto& r : reqs) copied.push_back((*copying)->Generate({r})[0]);
  ExpectSame(want, copied, "prefix cache, pages copied");
  EXPECT_EQ((*copying)->Stats().state_bytes_shared, 0);
  EXPECT_GT((*copying)->Stats().prefix_cache_bytes, st.prefix_cache_bytes);
}

// The prefix cache's host tier on the GPU (the CUDA runner's Offload / Restore: page copies to and
// from pinned memory on the model's stream). Under a state budget that forces preemption, the
// preempted requests' kept states move to the host tier and come back, and the outputs are those
// of the requests alone; and prompts' checkpoints evicted from a one-state device cache are
// restored from it by later requests with the same prefix.
TEST(GpuEngineTest, HostTierGivesTheSameOutputs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::vector<GenerateRequest> reqs = Mix(24);
  EngineOptions cold_options = Options(2, 4096, int64_t{256} << 20);
  cold_options.prefix_cache = false;
  auto cold = Engine::Create(cold_options);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  std::vector<RequestResult> alone;
  for (const auto& r : reqs) alone.push_back((*cold)->Generate({r})[0]);
  {
    EngineOptions o = PreemptingOptions(reqs);
    o.host_cache_bytes = int64_t{256} << 20;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ExpectSame(alone, (*e)->Generate(reqs), "host tier under preemption");
    const EngineStats st = (*e)->Stats();
    EXPECT_GT(st.preemptions, 0) << "the budget must force preemption";
    EXPECT_GT(st.preempted_states_kept, 0);
    EXPECT_GT(st.host_cache_offloads, 0);
    EXPECT_GT(st.host_cache_restores, 0);
    EXPECT_GT(st.preempted_resumed, 0);
  }
  std::vector<GenerateRequest> prefixed;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i) {
      GenerateRequest r = reqs[static_cast<size_t>(i)];
      r.prompt_ids.clear();
      for (int t = 0; t < 150; ++t) r.prompt_ids.push_back(2 + (t * (31 + 2 * i) + i) % 290);
      for (int t = 0; t < 5; ++t) r.prompt_ids.push_back(3 + t + 7 * round);
      r.params.max_tokens = 4;
      r.params.n = 1;
      prefixed.push_back(r);
    }
  }
  std::vector<RequestResult> want;
  for (const auto& r : prefixed) want.push_back((*cold)->Generate({r})[0]);
  EngineOptions o = Options(1, 64, int64_t{256} << 20);
  o.prefix_checkpoint_interval = 128;
  o.prefix_cache_entries = 1;  // one cached state in state memory, its rings set aside
  o.state_page_tokens = 32;    // a state of several pages
  o.host_cache_bytes = int64_t{256} << 20;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<RequestResult> got;
  for (const auto& r : prefixed) got.push_back((*e)->Generate({r})[0]);
  ExpectSame(want, got, "host tier hits");
  const EngineStats st = (*e)->Stats();
  EXPECT_EQ(st.host_cache_restores, 4);
  EXPECT_GE(st.prefix_tokens_reused, 4 * 128);
}

// Bad input on the GPU engine: per-request errors, the other requests still run.
TEST(GpuEngineTest, BadRequestsFailAlone) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto e = Engine::Create(Options(8, 64, int64_t{64} << 20));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<GenerateRequest> reqs = Mix(3);
  reqs[1].prompt_ids.assign(300, 5);  // longer than the context (256)
  const auto out = (*e)->Generate(reqs);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_EQ(out[1].status.code(), StatusCode::kOutOfRange) << out[1].status.ToString();
  EXPECT_TRUE(out[2].status.ok());
}

}  // namespace
}  // namespace dsinfer
