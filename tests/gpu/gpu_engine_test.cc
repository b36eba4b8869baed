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
#include "../unit/engine_mix.h"

namespace dsinfer {
namespace {

EngineOptions Options(int max_running, int64_t batch_tokens, int64_t state_bytes) {
  return testing::MixOptions(Device::kCuda, max_running, batch_tokens, state_bytes);
}

using testing::ExpectSame;
using testing::Mix;
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

// Speculative decoding on the GPU: verify chunks draw at each of their last k + 1 rows on the
// device and rejected drafts roll back by starting the next chunk at the kept length; MTP drafting
// is refused with a clear error until the CUDA model has the MTP layer.
TEST(GpuEngineTest, SpeculativeDecodingGivesTheSameIdsAndLogprobs) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::ExpectSpeculationExact(Device::kCuda);
  EngineOptions o = Options(16, 256, int64_t{256} << 20);
  o.speculative.method = SpeculativeOptions::Method::kMtp;
  EXPECT_EQ(Engine::Create(o).status().code(), StatusCode::kUnimplemented);
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
