// State cache: the layout's bytes equal the model's SequenceState bytes at every length; the
// planner respects the budget; reservations are all-or-nothing and Free returns everything.
#include <gtest/gtest.h>

#include <random>

#include "cache/memory_planner.h"
#include "cache/state_cache.h"
#include "cache/state_layout.h"
#include "model/deepseek_v4/model.h"
#include "model_test_util.h"

namespace dsinfer::cache {
namespace {

TEST(StateLayoutTest, BytesMatchTheModelStateAtEveryLength) {
  using namespace model::deepseek_v4;
  const auto dir = testing::SmallModelDir(WeightFormat::kF32, "layout");
  auto m = Model::Load(dir, {1});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (int slack : {0, 4}) {
    const auto layout = StateLayout::ForDeepseekV4((*m)->config(), slack);
    auto state = (*m)->NewSequence(slack);
    EXPECT_EQ(layout.ExactBytes(0), static_cast<int64_t>(state->bytes()));
    std::mt19937 rng(5);
    int64_t length = 0;
    for (int chunk : {1, 3, 12, 1, 20, 7, 30}) {
      std::vector<int32_t> ids(chunk);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % 300);
      ASSERT_TRUE((*m)->Forward({{state.get(), ids}}, LogitsRows::kLast).ok());
      length += chunk;
      EXPECT_EQ(layout.ExactBytes(length), static_cast<int64_t>(state->bytes())) << "length " << length;
    }
  }
}

TEST(MemoryPlannerTest, SplitsTheBudget) {
  const auto layout = StateLayout::ForDeepseekV4(testing::SmallConfig(), 0);
  EXPECT_GT(layout.FixedBytes(), 0);
  EXPECT_GT(layout.BytesPerToken(), 0);
  PlanOptions o;
  o.budget_bytes = 64 << 20;
  o.max_sequences = 8;
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->max_sequences, 8);
  EXPECT_LE(plan->planned_bytes, o.budget_bytes);
  EXPECT_GT(plan->token_capacity, 10000);
  o.budget_bytes = 1000;
  EXPECT_EQ(PlanMemory(layout, o).status().code(), StatusCode::kResourceExhausted);
}

TEST(StateCacheTest, ReserveIsAllOrNothingAndFreeReturnsEverything) {
  const auto layout = StateLayout::ForDeepseekV4(testing::SmallConfig(), 0);
  PlanOptions o;
  o.max_sequences = 2;
  o.typical_length = 64;
  o.budget_bytes = 2 * (layout.FixedBytes() + static_cast<int64_t>(layout.BytesPerToken() * 256));
  auto plan = PlanMemory(layout, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StateCache cache(*plan);
  EXPECT_TRUE(cache.Reserve(1, 10).ok());
  EXPECT_TRUE(cache.Reserve(1, 40).ok());
  EXPECT_EQ(cache.reserved_length(1), 40);
  EXPECT_TRUE(cache.Reserve(2, 16).ok());
  EXPECT_FALSE(cache.CanReserve(3, 1)) << "ring pools hold two requests";
  EXPECT_EQ(cache.Reserve(3, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(cache.Holds(3));
  const int64_t huge = plan->token_capacity * 2;
  const auto before = cache.Stats();
  EXPECT_FALSE(cache.Reserve(2, huge).ok());
  EXPECT_EQ(cache.Stats().bytes_used, before.bytes_used) << "a failed reserve changes nothing";
  EXPECT_FALSE(cache.FitsAlone(huge));
  EXPECT_TRUE(cache.FitsAlone(64));
  EXPECT_EQ(before.requests, 2);
  cache.Free(1);
  cache.Free(2);
  cache.Free(2);
  const auto after = cache.Stats();
  EXPECT_EQ(after.bytes_used, 0);
  EXPECT_EQ(after.requests, 0);
  for (const auto& pool : after.pools) EXPECT_EQ(pool.pages_used, 0) << pool.name;
}

}  // namespace
}  // namespace dsinfer::cache
