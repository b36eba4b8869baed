// The engine on the GPU (EngineOptions::device = kCuda, the CUDA ModelRunner): a request's ids and
// logprobs are bitwise the same when it runs alone (max_running 1) and inside a mix of many
// requests of different lengths — greedy and seeded sampling, n > 1, step token budgets from 7 to
// 4,096, preemption forced by a small state budget, decode steps replayed from CUDA graphs or
// launched eagerly — and do not depend on what ran before in the process; and the GPU engine gives
// the CPU engine's greedy ids. Skipped without a device.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "dsinfer/engine.h"
#include "engine/engine_core.h"
#include "io/model_config.h"
#include "model/deepseek_v4/cuda/cuda_model.h"

namespace dsinfer {
namespace {

const std::string kModel = std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden/A";

std::vector<GenerateRequest> Mix(int count) {
  std::mt19937 rng(11);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < count; ++i) {
    GenerateRequest r;
    const int len = 1 + static_cast<int>(rng() % 90);
    for (int t = 0; t < len; ++t) r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % 300));
    r.params.max_tokens = 4 + static_cast<int>(rng() % 28);
    r.params.ignore_eos = true;
    if (i % 3 == 0) {
      r.params.temperature = 0;  // greedy
    } else {
      r.params.temperature = 1.0f;
      r.params.top_p = i % 2 ? 0.9f : 1.0f;
      r.params.seed = 1000 + i;
    }
    r.params.n = i % 5 == 0 ? 2 : 1;
    r.params.logprobs = true;
    r.params.top_logprobs = i % 4 == 0 ? 3 : 0;
    reqs.push_back(r);
  }
  return reqs;
}

EngineOptions Options(int max_running, int64_t batch_tokens, int64_t state_bytes) {
  EngineOptions o;
  o.model_dir = kModel;
  o.device = Device::kCuda;
  o.max_running = max_running;
  o.max_batch_tokens = batch_tokens;
  o.state_memory_bytes = state_bytes;
  return o;
}

void ExpectSame(const std::vector<RequestResult>& a, const std::vector<RequestResult>& b,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].status.ok()) << what << " " << i << ": " << a[i].status.ToString();
    ASSERT_TRUE(b[i].status.ok()) << what << " " << i << ": " << b[i].status.ToString();
    ASSERT_EQ(a[i].completions.size(), b[i].completions.size()) << what << " " << i;
    for (size_t c = 0; c < a[i].completions.size(); ++c) {
      const Completion &x = a[i].completions[c], &y = b[i].completions[c];
      EXPECT_EQ(x.ids, y.ids) << what << ": request " << i << " completion " << c;
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << what << " " << i;
      for (size_t t = 0; t < x.logprobs.size(); ++t) {
        EXPECT_EQ(x.logprobs[t].logprob, y.logprobs[t].logprob) << what << " " << i << "/" << t;
        ASSERT_EQ(x.logprobs[t].top.size(), y.logprobs[t].top.size());
        for (size_t k = 0; k < x.logprobs[t].top.size(); ++k) {
          EXPECT_EQ(x.logprobs[t].top[k].id, y.logprobs[t].top[k].id);
          EXPECT_EQ(x.logprobs[t].top[k].logprob, y.logprobs[t].top[k].logprob);
        }
      }
    }
  }
}

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
  }
  {  // decode steps launched eagerly instead of replaying graphs (the default)
    EngineOptions o = Options(32, 64, int64_t{256} << 20);
    o.enforce_eager = true;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ExpectSame(alone, (*e)->Generate(reqs), "enforce_eager");
  }
  // Preemption: as the CPU engine's test, the smallest budget (in steps of 16 tokens of four
  // sequences, over the rings of the eight running ones) that holds every request alone, with
  // 16-token pages and rings planned for short requests, so that the running ones outgrow it.
  {
    auto config = io::LoadDeepseekV4Config(kModel);
    ASSERT_TRUE(config.ok());
    const auto layout = model::deepseek_v4::cuda::CudaModel::StateLayoutFor(*config);
    EngineOptions o = Options(8, 256, 0);
    o.typical_length = 8;
    o.state_page_tokens = 16;
    for (int k = 1; k < 400; ++k) {
      o.state_memory_bytes =
          8 * layout.FixedBytes() + k * 16 * static_cast<int64_t>(layout.BytesPerToken()) * 4;
      auto core = engine::EngineCore::Create(o);
      if (!core.ok()) continue;
      // Prepare caps max_tokens by what the budget holds alone: all must keep theirs.
      bool fits = true;
      for (const auto& r : reqs) {
        auto p = (*core)->Prepare(r);
        fits = fits && p.ok() && p->max_new_tokens == r.params.max_tokens;
      }
      if (fits) break;
    }
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

// The GPU engine (paged device state, device sampler) against the CPU engine, the reference, on the
// fp32 golden model: the same greedy ids, and logprobs within float rounding of the two backends'
// logits (~1e-6 relative), for prompts that span several state pages and n > 1 forks.
TEST(GpuEngineTest, GreedyIdsAndLogprobsMatchTheCpuEngine) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::vector<GenerateRequest> reqs = Mix(24);
  for (auto& r : reqs) {
    r.params.temperature = 0;
    r.params.n = 1;
    r.params.top_logprobs = 2;
  }
  reqs[0].prompt_ids.assign(200, 7);  // many pages of every list pool
  reqs[1].params.n = 3;               // forked siblings (greedy: all three equal)
  EngineOptions cpu = Options(8, 256, int64_t{64} << 20);
  cpu.device = Device::kCpu;
  auto ec = Engine::Create(cpu);
  auto eg = Engine::Create(Options(8, 256, int64_t{64} << 20));
  ASSERT_TRUE(ec.ok() && eg.ok());
  const auto want = (*ec)->Generate(reqs), got = (*eg)->Generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(want[i].status.ok() && got[i].status.ok()) << i;
    ASSERT_EQ(want[i].completions.size(), got[i].completions.size());
    for (size_t c = 0; c < want[i].completions.size(); ++c) {
      const Completion &x = want[i].completions[c], &y = got[i].completions[c];
      EXPECT_EQ(x.ids, y.ids) << "request " << i << " completion " << c;
      for (size_t t = 0; t < std::min(x.logprobs.size(), y.logprobs.size()); ++t) {
        EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, 1e-4) << i << "/" << t;
      }
    }
  }
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
