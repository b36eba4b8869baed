// distributed/: the in-process group's collectives (contents, many rounds, abort) and the expert
// placement with its load balancer (validation, replica routing, balance under skew).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/expert_placement.h"

namespace dsinfer::distributed {
namespace {

// What rank `from` sends rank `to` in round `round`: a size and bytes that name all three.
Bytes Message(int from, int to, int round) {
  Bytes b(static_cast<size_t>((from * 7 + to * 3 + round * 5) % 11));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<uint8_t>(from * 31 + to * 17 + round + i);
  return b;
}

TEST(CommunicatorTest, AllToAllDeliversEveryBufferOverManyRounds) {
  for (int size : {1, 2, 3, 5}) {
    auto group = MakeLocalGroup(size);
    constexpr int kRounds = 200;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        Communicator& c = *group[r];
        EXPECT_EQ(c.rank(), r);
        EXPECT_EQ(c.size(), size);
        for (int round = 0; round < kRounds; ++round) {
          std::vector<Bytes> send;
          for (int to = 0; to < size; ++to) send.push_back(Message(r, to, round));
          auto recv = c.AllToAll(std::move(send));
          if (!recv.ok() || static_cast<int>(recv->size()) != size) {
            ++failures;
            return;
          }
          for (int from = 0; from < size; ++from) {
            if ((*recv)[from] != Message(from, r, round)) ++failures;
          }
          if (round % 50 == 0 && !c.Barrier().ok()) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0) << size << " ranks";
  }
}

TEST(CommunicatorTest, AbortReleasesWaitingRanksWithItsStatus) {
  auto group = MakeLocalGroup(3);
  std::vector<Status> got(2, Status::Ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { got[r] = group[r]->AllToAll(std::vector<Bytes>(3)).status(); });
  }
  // Rank 2 fails instead of joining the exchange.
  group[2]->Abort(Internal("rank 2 failed"));
  for (auto& t : threads) t.join();
  for (const Status& st : got) {
    EXPECT_EQ(st.code(), StatusCode::kInternal);
    EXPECT_NE(st.message().find("rank 2 failed"), std::string::npos);
  }
  // Later calls fail at once too.
  EXPECT_FALSE(group[0]->Barrier().ok());
}

TEST(CommunicatorTest, AWrongBufferCountFailsTheGroup) {
  auto group = MakeLocalGroup(2);
  Status other = Status::Ok();
  std::thread t([&] { other = group[1]->AllToAll(std::vector<Bytes>(2)).status(); });
  const Status mine = group[0]->AllToAll(std::vector<Bytes>(3)).status();
  t.join();
  EXPECT_EQ(mine.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(other.code(), StatusCode::kInvalidArgument);
}

TEST(ExpertPlacementTest, ContiguousHoldsEachExpertOnce) {
  const ExpertPlacement p = ExpertPlacement::Contiguous(10, 4);
  EXPECT_EQ(p.slots_per_rank(), 3);
  EXPECT_EQ(p.ExpertsOf(0), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(p.ExpertsOf(3), (std::vector<int32_t>{9}));
  for (int e = 0; e < 10; ++e) {
    ASSERT_EQ(p.Holders(e).size(), 1u);
    EXPECT_EQ(p.Holders(e)[0], e / 3);
    // Every rank sends an expert's rows to its one holder.
    for (int from = 0; from < 4; ++from) EXPECT_EQ(p.RankFor(e, from, 17), e / 3);
  }
}

TEST(ExpertPlacementTest, FromSlotsRefusesBadPlacements) {
  EXPECT_TRUE(ExpertPlacement::FromSlots(3, 2, {0, 1, 2, -1}).ok());
  EXPECT_FALSE(ExpertPlacement::FromSlots(3, 2, {0, 1, 1, -1}).ok());  // expert 2 unheld
  EXPECT_FALSE(ExpertPlacement::FromSlots(3, 2, {0, 0, 1, 2}).ok());   // rank 0 holds 0 twice
  EXPECT_FALSE(ExpertPlacement::FromSlots(3, 2, {0, 1, 2, 3}).ok());   // no expert 3
  EXPECT_FALSE(ExpertPlacement::FromSlots(3, 2, {0, 1, 2}).ok());      // uneven slots
  EXPECT_FALSE(ExpertPlacement::FromSlots(3, 2, {0, 1, -2, 2}).ok());  // bad id
}

TEST(ExpertPlacementTest, RowsGoToALocalReplicaElseTakeTurns) {
  // Expert 0 on ranks 0 and 2, expert 1 on rank 1, expert 2 on ranks 1 and 2.
  auto p = ExpertPlacement::FromSlots(3, 3, {0, -1, 1, 2, 0, 2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Holders(0), (std::vector<int32_t>{0, 2}));
  for (int64_t nth = 0; nth < 6; ++nth) {
    EXPECT_EQ(p->RankFor(0, 0, nth), 0);  // held locally
    EXPECT_EQ(p->RankFor(0, 2, nth), 2);
    EXPECT_EQ(p->RankFor(0, 1, nth), nth % 2 == 0 ? 2 : 0);  // in turn, from rank 1's offset
    EXPECT_EQ(p->RankFor(2, 0, nth), nth % 2 == 0 ? 1 : 2);
    EXPECT_EQ(p->RankFor(1, 2, nth), 1);
  }
  // A source's rows of a 3-replica expert split evenly, each source starting elsewhere.
  auto q = ExpertPlacement::FromSlots(2, 4, {0, 1, 0, -1, 0, -1, -1, -1});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  std::vector<int> count(4, 0);
  for (int64_t nth = 0; nth < 30; ++nth) ++count[q->RankFor(0, 3, nth)];
  EXPECT_EQ(count, (std::vector<int>{10, 10, 10, 0}));
}

TEST(EplbTest, ReplicatesAndSpreadsHotExpertsUnderSkew) {
  // 16 experts, a few hot ones (Zipf-like), over 4 ranks of 5 slots (4 spare).
  std::vector<double> load(16);
  for (int e = 0; e < 16; ++e) load[e] = 1000.0 / ((e * 5 + 3) % 16 + 1);
  const ExpertPlacement contiguous = ExpertPlacement::Contiguous(16, 4);
  auto planned = PlanPlacement(load, 4, 5);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  const ExpertPlacement& p = *planned;
  for (int e = 0; e < 16; ++e) EXPECT_GE(p.Holders(e).size(), 1u);
  int replicas = 0;
  for (int e = 0; e < 16; ++e) replicas += static_cast<int>(p.Holders(e).size());
  EXPECT_EQ(replicas, 20);  // every slot used
  // The hottest expert (e = 3: load 1000) got the most replicas.
  const auto hottest = std::max_element(load.begin(), load.end()) - load.begin();
  for (int e = 0; e < 16; ++e) EXPECT_GE(p.Holders(hottest).size(), p.Holders(e).size());
  const double before = LoadImbalance(contiguous, load), after = LoadImbalance(p, load);
  EXPECT_GT(before, 1.5);
  EXPECT_LT(after, 1.1);
  EXPECT_LT(after, before);
  // Deterministic.
  auto again = PlanPlacement(load, 4, 5);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == p);
}

TEST(EplbTest, BalancesRandomLoadsBetterThanContiguous) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int experts = 8 + static_cast<int>(rng() % 57), ranks = 2 + static_cast<int>(rng() % 7);
    const int spare = static_cast<int>(rng() % (experts + 1));
    const int slots = (experts + spare + ranks - 1) / ranks;
    std::vector<double> load(static_cast<size_t>(experts));
    for (double& l : load) l = std::pow(static_cast<double>(rng() % 1000 + 1), 1.5);
    auto p = PlanPlacement(load, ranks, slots);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    const std::vector<double> per_rank = RankLoads(*p, load);
    EXPECT_NEAR(std::accumulate(per_rank.begin(), per_rank.end(), 0.0),
                std::accumulate(load.begin(), load.end(), 0.0), 1e-6 * experts * 1e5);
    // The greedy's bound: no rank above the mean by more than the heaviest replica.
    double heaviest = 0;
    for (int e = 0; e < experts; ++e) heaviest = std::max(heaviest, load[e] / p->Holders(e).size());
    const double mean = std::accumulate(load.begin(), load.end(), 0.0) / static_cast<double>(ranks);
    EXPECT_LE(*std::max_element(per_rank.begin(), per_rank.end()), mean + heaviest + 1e-6);
    EXPECT_LE(LoadImbalance(*p, load),
              LoadImbalance(ExpertPlacement::Contiguous(experts, ranks), load) + 1e-9);
  }
}

TEST(EplbTest, RefusesWhatCannotBePlaced) {
  EXPECT_FALSE(PlanPlacement(std::vector<double>(9, 1.0), 2, 4).ok());  // 8 slots, 9 experts
  EXPECT_FALSE(PlanPlacement({1.0, -1.0}, 2, 1).ok());
  EXPECT_FALSE(PlanPlacement({}, 2, 1).ok());
  // More slots than replicas can fill (an expert at most once per rank): the rest stay empty.
  auto p = PlanPlacement({5.0, 1.0}, 2, 4);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Holders(0).size(), 2u);
  EXPECT_EQ(p->Holders(1).size(), 2u);
}

}  // namespace
}  // namespace dsinfer::distributed
