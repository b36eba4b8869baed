// The expert-parallel exchange's messages (model/deepseek_v4/expert_exchange.h), shared by the CPU
// model and the CUDA model: packed, grouped, answered and put back over simulated ranks (no
// communicator: each rank's sends are handed to their destinations by the test), with replicas;
// malformed messages and rows of experts a rank does not hold are errors.
#include "model/deepseek_v4/expert_exchange.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace dsinfer::model::deepseek_v4 {
namespace {

constexpr int kRanks = 3, kE = 6, kK = 2;
constexpr int64_t kD = 4;

// Experts 0-5 over 3 ranks, 3 slots each: expert 1 on ranks 0 and 2, expert 4 on ranks 1 and 2.
distributed::ExpertPlacement Placement() {
  auto p = distributed::ExpertPlacement::FromSlots(kE, kRanks, {0, 1, 2, 3, 4, 5, 1, 4, -1});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

// Rank r's rows: n_r tokens, row t's values r * 100 + t * 10 + column; its pairs' experts.
std::vector<float> Rows(int r, int n) {
  std::vector<float> x(static_cast<size_t>(n * kD));
  for (int t = 0; t < n; ++t)
    for (int64_t d = 0; d < kD; ++d) x[t * kD + d] = static_cast<float>(r * 100 + t * 10 + d);
  return x;
}
std::vector<int32_t> Sel(int r, int n) {
  std::vector<int32_t> s;
  for (int t = 0; t < n; ++t) {
    s.push_back((r + t) % kE);
    s.push_back(r == 0 ? 4 : 1);  // a replicated expert the rank does not hold
  }
  return s;
}

TEST(ExpertExchangeTest, EveryPairGetsItsExpertsAnswerBack) {
  const distributed::ExpertPlacement place = Placement();
  const int n[kRanks] = {3, 5, 0};
  std::vector<ExpertDispatch> out(kRanks);
  std::vector<std::vector<int32_t>> sel(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    sel[r] = Sel(r, n[r]);
    const std::vector<float> x = Rows(r, n[r]);
    out[r] = PackExpertDispatch(place, r, sel[r].data(), n[r] * kK, kK, x.data(), kD);
    ASSERT_EQ(out[r].send.size(), static_cast<size_t>(kRanks));
    for (int to = 0; to < kRanks; ++to) {
      for (const int64_t p : out[r].sent[to]) EXPECT_TRUE(place.Holds(to, sel[r][p]));
    }
  }
  // Rank 0's 3 rows of expert 4 (held by ranks 1 and 2) take both holders.
  for (const int to : {1, 2}) {
    int rows_of_4 = 0;
    for (const int64_t p : out[0].sent[to]) rows_of_4 += sel[0][p] == 4;
    EXPECT_GT(rows_of_4, 0) << "rank " << to;
  }
  // Each rank serves what it received: its "expert" adds 1000 * (expert + 1) to the row.
  std::vector<std::vector<distributed::Bytes>> back_to(kRanks,
                                                       std::vector<distributed::Bytes>(kRanks));
  for (int me = 0; me < kRanks; ++me) {
    std::vector<distributed::Bytes> recv(kRanks);
    for (int from = 0; from < kRanks; ++from) recv[from] = out[from].send[me];
    auto work = GroupExpertWork(recv, kE, kD, me, [&](int e) { return place.Holds(me, e); });
    ASSERT_TRUE(work.ok()) << work.status().message();
    for (size_t i = 0; i + 1 < work->experts.size(); ++i) {
      EXPECT_LT(work->experts[i], work->experts[i + 1]) << "experts ascending";
    }
    std::vector<float> answers(work->rows.size());
    for (size_t i = 0; i < work->experts.size(); ++i) {
      for (int64_t row = work->offsets[i]; row < work->offsets[i + 1]; ++row) {
        const auto [from, index] = work->origin[row];
        int32_t sent_expert = -1;  // the expert named in the record this row came from
        std::memcpy(&sent_expert,
                    recv[from].data() + index * (sizeof(int32_t) + kD * sizeof(float)),
                    sizeof(int32_t));
        EXPECT_EQ(sent_expert, work->experts[i]);
        for (int64_t d = 0; d < kD; ++d) {
          answers[row * kD + d] = work->rows[row * kD + d] + 1000.0f * (work->experts[i] + 1);
        }
      }
    }
    const std::vector<distributed::Bytes> reply =
        PackExpertReplies(*work, answers.data(), kD, kRanks);
    for (int to = 0; to < kRanks; ++to) back_to[to][me] = reply[to];
  }
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> y(static_cast<size_t>(n[r] * kK * kD), -1.0f);
    ASSERT_TRUE(ScatterExpertReplies(back_to[r], out[r], kD, y.data()).ok());
    const std::vector<float> x = Rows(r, n[r]);
    for (int64_t p = 0; p < n[r] * kK; ++p) {
      for (int64_t d = 0; d < kD; ++d) {
        EXPECT_EQ(y[p * kD + d], x[(p / kK) * kD + d] + 1000.0f * (sel[r][p] + 1))
            << "rank " << r << " pair " << p;
      }
    }
  }
}

TEST(ExpertExchangeTest, MalformedMessagesAndForeignExpertsAreErrors) {
  const distributed::ExpertPlacement place = Placement();
  const std::vector<float> x = Rows(0, 2);
  const std::vector<int32_t> sel = {3, 1, 0, 5};
  const ExpertDispatch d = PackExpertDispatch(place, 0, sel.data(), 4, kK, x.data(), kD);
  // Rank 1 (experts 3, 4, 5) received rank 0's rows for it; rank 2 does not hold expert 3.
  std::vector<distributed::Bytes> recv(kRanks);
  recv[0] = d.send[1];
  EXPECT_TRUE(GroupExpertWork(recv, kE, kD, 1, [&](int e) { return place.Holds(1, e); }).ok());
  EXPECT_EQ(
      GroupExpertWork(recv, kE, kD, 2, [&](int e) { return place.Holds(2, e); }).status().code(),
      StatusCode::kInternal);
  recv[0].pop_back();  // a truncated record
  EXPECT_EQ(
      GroupExpertWork(recv, kE, kD, 1, [&](int e) { return place.Holds(1, e); }).status().code(),
      StatusCode::kInternal);
  // An answer of the wrong size.
  std::vector<distributed::Bytes> back(kRanks);
  for (int to = 0; to < kRanks; ++to) back[to].resize(d.sent[to].size() * kD * sizeof(float));
  std::vector<float> y(4 * kD);
  EXPECT_TRUE(ScatterExpertReplies(back, d, kD, y.data()).ok());
  back[1].push_back(0);
  EXPECT_EQ(ScatterExpertReplies(back, d, kD, y.data()).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
