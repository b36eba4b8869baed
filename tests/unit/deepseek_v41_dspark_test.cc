// DeepSeek-V4.1's DSpark drafter on the CPU (model/deepseek_v41/dspark.cc): its config keys, its
// loading, and that a draft depends only on the sequence's tokens and the anchor — not on how the
// tokens were chunked, not on drafts verified and rolled back before, not on the other sequences
// drafted with it — and leaves the sequence's state as it was. The golden comparison against
// DeepSeek's reference is tests/golden/golden_v41_test.cc (GoldenDSparkTest, config D).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/init_presets.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/state_layout.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v41 {
namespace {

std::string TextConfig(const std::string& extra) {
  return R"({"model_type": "deepseek_v41", "text_config": {"vocab_size": 300, "hidden_size": 64,
    "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 64, "qk_rope_head_dim": 16,
    "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16, "n_routed_experts": 6,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "sliding_window": 8)" +
         extra + "}}";
}

TEST(DSparkConfigTest, KeysDefaultsAndValidation) {
  auto c = io::ParseDeepseekV41Config(TextConfig(
      R"(, "num_nextn_predict_layers": 2, "dspark_block_size": 4, "dspark_noise_token_id": 7,
      "dspark_target_layer_ids": [1, 3], "dspark_markov_rank": 8, "dspark_n_routed_experts": 5,
      "dspark_num_experts_per_tok": 3, "compress_ratios": [0, 0, 0, 0, 0, 0])"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->has_dspark());
  EXPECT_EQ(c->num_nextn_predict_layers, 2);
  EXPECT_EQ(c->dspark_block_size, 4);
  EXPECT_EQ(c->dspark_noise_token_id, 7);
  EXPECT_EQ(c->dspark_target_layer_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(c->dspark_markov_rank, 8);
  EXPECT_EQ(c->dspark_n_routed_experts, 5);
  EXPECT_EQ(c->dspark_num_experts_per_tok, 3);
  EXPECT_EQ(c->compress_ratios.size(), 4u) << "the draft layers' entries are dropped";
  // The round trip keeps every key.
  auto again = io::ParseDeepseekV41Config(io::DeepseekV41ConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->dspark_target_layer_ids, c->dspark_target_layer_ids);
  EXPECT_EQ(again->dspark_noise_token_id, 7);
  EXPECT_EQ(again->dspark_num_experts_per_tok, 3);

  EXPECT_TRUE(c->ValidateDSpark().ok());

  // Defaults: 3 draft layers (the reference's), the taps the last three layers (the release's
  // 37-39 of 40). The release's noise id is outside this vocabulary: the model loads all the same,
  // only its drafter is refused.
  auto d = io::ParseDeepseekV41Config(TextConfig(""));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->num_nextn_predict_layers, 3);
  EXPECT_EQ(d->dspark_target_layer_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d->dspark_block_size, 5);
  EXPECT_NE(d->ValidateDSpark().message().find("dspark_noise_token_id"), std::string::npos);

  // The real-dimension preset with the release's 3 draft layers added (`bench --dspark`) is a
  // drafter the model takes: its taps are the last three layers.
  io::DeepseekV41Config flash = *PresetConfig("v41-flash-l8");
  flash.num_nextn_predict_layers = 3;
  EXPECT_TRUE(flash.ValidateDSpark().ok()) << flash.ValidateDSpark().message();
  EXPECT_EQ(flash.dspark_target_layer_ids, (std::vector<int>{5, 6, 7}));

  // A config built in code with draft layers but no taps (a file's empty list takes the default).
  io::DeepseekV41Config no_taps = *c;
  no_taps.dspark_target_layer_ids.clear();
  EXPECT_NE(no_taps.ValidateDSpark().message().find("dspark_target_layer_ids"), std::string::npos);

  for (const char* bad : {
           R"(, "dspark_noise_token_id": 300)",
           R"(, "dspark_noise_token_id": 9, "dspark_block_size": 0)",
           R"(, "dspark_noise_token_id": 9, "dspark_block_size": 17)",
           R"(, "dspark_noise_token_id": 9, "dspark_target_layer_ids": [2, 1])",
           R"(, "dspark_noise_token_id": 9, "dspark_target_layer_ids": [0, 4])",
           R"(, "dspark_noise_token_id": 9, "dspark_markov_rank": -1)",
           R"(, "dspark_noise_token_id": 9, "dspark_num_experts_per_tok": 200)",
           R"(, "dspark_noise_token_id": 9, "compress_ratios": [0, 0, 0, 0, 0, 2, 0])",
       }) {
    auto r = io::ParseDeepseekV41Config(TextConfig(bad));
    ASSERT_TRUE(r.ok()) << bad << ": the text model loads; " << r.status().ToString();
    const Status st = r->ValidateDSpark();
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(
        st.message().find(std::string(bad).find("compress") != std::string::npos ? "compress_ratios"
                                                                                 : "dspark"),
        std::string::npos)
        << st.message();
  }
}

class DSparkModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::SmallV41ModelDir("v41_dspark"));
    auto m = Model::Load(*dir_, {2, /*dspark=*/true});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  static std::vector<int32_t> Ids(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 299);
    return ids;
  }
  // A sequence fed `ids` in chunks of `sizes`.
  static std::unique_ptr<SequenceState> Fed(const std::vector<int32_t>& ids,
                                            const std::vector<int>& sizes, int slack = 8) {
    auto s = model_->NewSequence(slack);
    size_t at = 0;
    for (int n : sizes) {
      std::vector<int32_t> chunk(ids.begin() + at, ids.begin() + at + n);
      at += n;
      EXPECT_TRUE(model_->Forward({{s.get(), chunk, 1}}, LogitsRows::kTail).ok());
    }
    EXPECT_EQ(at, ids.size());
    return s;
  }
  static DSparkDraft Draft(SequenceState* s, int32_t anchor) {
    auto d = model_->DraftDSpark({{s, anchor}}, /*logits=*/true);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d->at(0);
  }
  static void ExpectSame(const DSparkDraft& a, const DSparkDraft& b, const std::string& what) {
    EXPECT_EQ(a.ids, b.ids) << what;
    EXPECT_EQ(a.confidence, b.confidence) << what;
    EXPECT_EQ(a.logits, b.logits) << what;
  }

  static std::string* dir_;
  static Model* model_;
};
std::string* DSparkModelTest::dir_ = nullptr;
Model* DSparkModelTest::model_ = nullptr;

TEST_F(DSparkModelTest, DraftIsABlockOfGreedyTokensWithTheMarkovTerm) {
  const auto& c = model_->config();
  const auto ids = Ids(30, 1);
  auto s = Fed(ids, {30});
  const DSparkDraft d = Draft(s.get(), 17);
  const int64_t B = c.dspark_block_size, V = c.vocab_size;
  ASSERT_EQ(d.ids.size(), static_cast<size_t>(B));
  ASSERT_EQ(d.confidence.size(), static_cast<size_t>(B));
  ASSERT_EQ(d.logits.size(), static_cast<size_t>(B * V));
  bool markov_moves = false;
  for (int64_t k = 0; k < B; ++k) {
    const float* row = d.logits.data() + k * V;
    EXPECT_EQ(d.ids[k], std::max_element(row, row + V) - row) << "slot " << k;
    EXPECT_TRUE(std::isfinite(d.confidence[k]));
    for (int64_t v = 0; v < V; ++v) markov_moves |= row[v] != d.base[k * V + v];
  }
  EXPECT_TRUE(markov_moves) << "the Markov term changes the logits";
  // The state is as it was: the same draft again, and the next forward's logits unchanged.
  ExpectSame(Draft(s.get(), 17), d, "drafted twice");
  EXPECT_EQ(s->length(), 30);
  // Another anchor, another draft.
  EXPECT_NE(Draft(s.get(), 18).logits, d.logits);
}

TEST_F(DSparkModelTest, DraftDependsOnlyOnTheTokens) {
  // 29 tokens: the windows (8) and the draft rings (8 + slack) wrap several times.
  const auto ids = Ids(29, 2);
  auto whole = Fed(ids, {29});
  const DSparkDraft want = Draft(whole.get(), 5);
  for (const auto& [name, sizes] : testing::Schedules(29, 7)) {
    auto s = Fed(ids, sizes);
    ExpectSame(Draft(s.get(), 5), want, name);
  }
  // Drafts verified then rolled back (a chunk of 5 rows, the last 2 rolled back).
  auto s = Fed(std::vector<int32_t>(ids.begin(), ids.begin() + 26), {26});
  ASSERT_TRUE(
      model_->Forward({{s.get(), {ids[26], ids[27], ids[28], 3, 4}, 5}}, LogitsRows::kTail).ok());
  ASSERT_TRUE(s->Rollback(29).ok());
  ExpectSame(Draft(s.get(), 5), want, "after a rollback");
  // A rollback of the whole slack (8) after the rings wrapped.
  ASSERT_TRUE(model_->Forward({{s.get(), {1, 2, 3, 4, 5, 6, 7, 8}, 1}}, LogitsRows::kTail).ok());
  ASSERT_TRUE(s->Rollback(29).ok());
  ExpectSame(Draft(s.get(), 5), want, "after a rollback of the whole slack");
  // Drafted in a batch with other sequences.
  auto other = Fed(Ids(11, 3), {11});
  auto copy = Fed(ids, {29});
  auto batch = model_->DraftDSpark({{other.get(), 9}, {copy.get(), 5}, {whole.get(), 8}}, true);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ExpectSame(batch->at(1), want, "in a batch");
  ExpectSame(batch->at(0), Draft(other.get(), 9), "the other sequence, in a batch");
  // A forked copy drafts the same.
  auto fork = model_->NewSequence(8);
  fork->CopyFrom(*whole);
  ExpectSame(Draft(fork.get(), 5), want, "a copy");
}

TEST_F(DSparkModelTest, BadUseIsRefused) {
  auto fresh = model_->NewSequence(8);
  EXPECT_FALSE(model_->DraftDSpark({{fresh.get(), 5}}).ok()) << "nothing to draft after";
  auto s = Fed(Ids(5, 4), {5});
  EXPECT_FALSE(model_->DraftDSpark({{s.get(), 300}}).ok()) << "an anchor outside the vocabulary";
  // A model loaded without the drafter refuses to draft, and its states have no draft rings.
  auto plain = Model::Load(*dir_, {1});
  ASSERT_TRUE(plain.ok());
  auto p = (*plain)->NewSequence(8);
  EXPECT_EQ(p->draft_stages(), 0);
  EXPECT_FALSE((*plain)->DraftDSpark({{p.get(), 5}}).ok());
  // States of the other kind are refused by Forward.
  EXPECT_FALSE((*plain)->Forward({{s.get(), {1}, 1}}, LogitsRows::kTail).ok());
  // A checkpoint without draft layers: loading the drafter fails, naming why.
  io::DeepseekV41Config none = *PresetConfig("v41-tiny");
  none.vocab_size = 300;
  const std::string dir = testing::ScratchDir("v41_no_dspark");
  ASSERT_TRUE(WriteRandomModel(none, dir, 3).ok());
  auto missing = Model::Load(dir, {1, true});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("num_nextn_predict_layers"), std::string::npos)
      << missing.status().message();
}

TEST_F(DSparkModelTest, StateLayoutHoldsTheRings) {
  const auto& c = model_->config();
  const cache::StateLayout with = DeepseekV41StateLayout(c, 8, true);
  const cache::StateLayout without = DeepseekV41StateLayout(c, 8, false);
  const int64_t ring = (c.sliding_window + 8) * WindowFormat(c).row_floats() * 4;
  EXPECT_EQ(with.FixedBytes() - without.FixedBytes(), c.num_nextn_predict_layers * ring);
  auto s = Fed(Ids(20, 5), {20});
  EXPECT_EQ(s->bytes(), with.ExactBytes(20));
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v41
