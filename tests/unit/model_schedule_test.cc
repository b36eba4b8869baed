// Chunking invariance, batch invariance, rollback and MTP of the CPU model: every schedule must give
// bit-identical logits (our GEMM and attention reduce in a fixed order).
#include <gtest/gtest.h>

#include <random>

#include "model/deepseek_v4/model.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v4 {
namespace {

class ModelScheduleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::SmallModelDir(WeightFormat::kF32, "schedule"));
    auto m = Model::Load(*dir_, {2});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  static std::vector<int32_t> Ids(int n, uint32_t seed) { return testing::RandomIds(n, seed); }

  // Logits of every position when fed in chunks of the given sizes.
  static std::vector<float> Run(const std::vector<int32_t>& ids, const std::vector<int>& sizes) {
    return testing::ChunkedLogits(*model_, ids, sizes, LogitsRows::kAll);
  }

  static std::string* dir_;
  static Model* model_;
};
std::string* ModelScheduleTest::dir_ = nullptr;
Model* ModelScheduleTest::model_ = nullptr;

TEST_F(ModelScheduleTest, AllSchedulesGiveIdenticalLogits) {
  const auto ids = Ids(70, 1);  // 4+ HCA windows (rate 16), 17 CSA entries > top-k 8, window 16
  const auto whole = Run(ids, {70});
  ASSERT_EQ(whole.size(), 70u * 300u);
  for (const auto& [name, sizes] : testing::Schedules(70, 20)) {
    EXPECT_EQ(Run(ids, sizes), whole) << name;
  }
}

TEST_F(ModelScheduleTest, BatchCompositionDoesNotChangeLogits) {
  const auto a = Ids(40, 2), b = Ids(25, 3);
  const auto alone_a = Run(a, {40}), alone_b = Run(b, {25});
  auto sa = model_->NewSequence(), sb = model_->NewSequence();
  auto out = model_->Forward({{sa.get(), a}, {sb.get(), b}}, LogitsRows::kAll);
  ASSERT_TRUE(out.ok());
  std::vector<float> got_a(out->logits.begin(), out->logits.begin() + 40 * 300);
  std::vector<float> got_b(out->logits.begin() + 40 * 300, out->logits.end());
  EXPECT_EQ(got_a, alone_a);
  EXPECT_EQ(got_b, alone_b);
  // Mixed phases: one request decoding while another prefills.
  auto sc = model_->NewSequence(), sd = model_->NewSequence();
  ASSERT_TRUE(model_->Forward({{sc.get(), std::vector<int32_t>(a.begin(), a.begin() + 39)}}, LogitsRows::kAll).ok());
  auto mixed = model_->Forward({{sd.get(), b}, {sc.get(), {a[39]}}}, LogitsRows::kLast);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(std::vector<float>(mixed->logits.begin() + 300, mixed->logits.end()),
            std::vector<float>(alone_a.end() - 300, alone_a.end()));
  EXPECT_EQ(std::vector<float>(mixed->logits.begin(), mixed->logits.begin() + 300),
            std::vector<float>(alone_b.end() - 300, alone_b.end()));
}

TEST_F(ModelScheduleTest, RollbackThenReplayEqualsFreshRun) {
  const auto ids = Ids(50, 4);
  const auto whole = Run(ids, {50});
  for (int cut : {33, 31, 47, 48}) {  // cuts inside and at CSA (4) / HCA (16) window edges
    auto state = model_->NewSequence();
    auto wrong = ids;
    for (int i = cut; i < 50; ++i) wrong[i] = (wrong[i] + 1) % 300;
    ASSERT_TRUE(model_->Forward({{state.get(), std::vector<int32_t>(wrong.begin(), wrong.begin() + cut)}}, LogitsRows::kAll).ok());
    const int drafted = std::min(50 - cut, 12);
    ASSERT_TRUE(model_->Forward({{state.get(), std::vector<int32_t>(wrong.begin() + cut, wrong.begin() + cut + drafted)}}, LogitsRows::kAll).ok());
    ASSERT_TRUE(state->Rollback(cut).ok());
    auto out = model_->Forward({{state.get(), std::vector<int32_t>(ids.begin() + cut, ids.end())}}, LogitsRows::kAll);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->logits, std::vector<float>(whole.begin() + cut * 300, whole.end())) << cut;
  }
  auto state = model_->NewSequence(4);
  ASSERT_TRUE(model_->Forward({{state.get(), ids}}, LogitsRows::kLast).ok());
  EXPECT_EQ(state->Rollback(40).code(), StatusCode::kOutOfRange);
}

TEST_F(ModelScheduleTest, MtpIsChunkInvariant) {
  ASSERT_TRUE(model_->has_mtp());
  const auto ids = Ids(30, 5);
  const int64_t hcD = model_->config().hc_mult * model_->config().hidden_size;
  auto state = model_->NewSequence();
  auto main = model_->Forward({{state.get(), ids}}, LogitsRows::kAll, /*keep_streams=*/true);
  ASSERT_TRUE(main.ok());
  std::vector<int32_t> next(ids.begin() + 1, ids.end());
  next.push_back(7);
  auto s1 = model_->NewSequence();
  auto whole = model_->ForwardMtp({{s1.get(), main->streams, next}}, LogitsRows::kAll);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->logits.size(), 30u * 300u);
  auto s2 = model_->NewSequence();
  std::vector<float> pieces;
  for (int at = 0; at < 30;) {
    const int n = at < 20 ? 7 : 1;
    const int cnt = std::min(n, 30 - at);
    Model::MtpChunk ch{s2.get(),
                       std::vector<float>(main->streams.begin() + at * hcD, main->streams.begin() + (at + cnt) * hcD),
                       std::vector<int32_t>(next.begin() + at, next.begin() + at + cnt)};
    auto out = model_->ForwardMtp({ch}, LogitsRows::kAll);
    ASSERT_TRUE(out.ok());
    pieces.insert(pieces.end(), out->logits.begin(), out->logits.end());
    at += cnt;
  }
  EXPECT_EQ(pieces, whole->logits);
}

TEST_F(ModelScheduleTest, MtpRollbackOfChainedDraftsIsExact) {
  // Chained draft rows on the MTP layer's own outputs, then RollbackMtp: the next rows (with the
  // main model's streams) give the logits of a state that never drafted.
  const auto ids = Ids(40, 6);
  const int64_t hcD = model_->config().hc_mult * model_->config().hidden_size;
  auto state = model_->NewSequence(4);
  auto main = model_->Forward({{state.get(), ids}}, LogitsRows::kAll, /*keep_streams=*/true);
  ASSERT_TRUE(main.ok());
  std::vector<int32_t> next(ids.begin() + 1, ids.end());
  next.push_back(11);
  auto run = [&](int from, int to, SequenceState* s) {
    Model::MtpChunk ch{
        s, std::vector<float>(main->streams.begin() + from * hcD, main->streams.begin() + to * hcD),
        std::vector<int32_t>(next.begin() + from, next.begin() + to)};
    auto out = model_->ForwardMtp({ch}, LogitsRows::kAll);
    EXPECT_TRUE(out.ok());
    return out.ok() ? *out : ForwardOutput{};
  };
  auto clean = model_->NewSequence(4);
  run(0, 30, clean.get());
  const auto want = run(30, 40, clean.get()).logits;
  auto drafted = model_->NewSequence(4);
  const auto first = run(0, 30, drafted.get());
  std::vector<float> x(first.streams.end() - hcD, first.streams.end());
  for (int round = 0; round < 3; ++round) {  // three chained rows at positions 30, 31, 32
    auto out = model_->ForwardMtp({{drafted.get(), x, {static_cast<int32_t>(5 + round)}}},
                                  LogitsRows::kLast);
    ASSERT_TRUE(out.ok());
    x = out->streams;
  }
  EXPECT_EQ(drafted->mtp_length(), 33);
  ASSERT_TRUE(drafted->RollbackMtp(30).ok());
  EXPECT_EQ(run(30, 40, drafted.get()).logits, want);
  EXPECT_EQ(drafted->RollbackMtp(20).code(), StatusCode::kOutOfRange) << "beyond the slack of 4";
}

TEST_F(ModelScheduleTest, BadIdsAreRejectedWithoutChangingState) {
  auto state = model_->NewSequence();
  auto out = model_->Forward({{state.get(), {1, 2, 300}}}, LogitsRows::kAll);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(state->length(), 0);
  out = model_->Forward({{state.get(), {1, -1}}}, LogitsRows::kAll);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
