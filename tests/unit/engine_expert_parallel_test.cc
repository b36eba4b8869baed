// The engine on an expert-parallel model (EngineOptions::expert_parallel): a mix of greedy and
// seeded requests (n > 1, logprobs) gives every request the same ids and logprobs as on the single
// model, at a large and a small step budget (prefill chunks beside decodes), with replicas and
// EPLB re-planning the placement while the requests run; and the CUDA backend refuses it.
#include <gtest/gtest.h>

#include "dsinfer/engine.h"
#include "engine_mix.h"

namespace dsinfer {
namespace {

TEST(EngineExpertParallelTest, GivesTheSingleModelsResults) {
  const std::vector<GenerateRequest> reqs = testing::Mix(24);
  std::vector<RequestResult> want;
  {
    auto e = Engine::Create(testing::MixOptions(Device::kCpu, 16, 256, int64_t{256} << 20));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    want = e.value()->Generate(reqs);
  }
  struct Run {
    int ranks, redundant;
    int64_t interval, budget;
  };
  for (const Run& run : {Run{2, 0, 0, 256}, Run{3, 2, 3, 24}}) {
    EngineOptions o = testing::MixOptions(Device::kCpu, 16, run.budget, int64_t{256} << 20);
    o.expert_parallel = run.ranks;
    o.eplb_redundant_experts = run.redundant;
    o.eplb_interval = run.interval;
    auto e = Engine::Create(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    testing::ExpectSame(want, e.value()->Generate(reqs),
                        std::to_string(run.ranks) + " ranks, budget " + std::to_string(run.budget));
  }
}

TEST(EngineExpertParallelTest, TheCudaBackendRefusesIt) {
  EngineOptions o = testing::MixOptions(Device::kCuda, 16, 256, int64_t{256} << 20);
  o.expert_parallel = 2;
  auto e = Engine::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find("expert parallelism"), std::string::npos)
      << e.status().ToString();
}

}  // namespace
}  // namespace dsinfer
