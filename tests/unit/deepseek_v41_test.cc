// DeepSeek-V4.1 on the CPU: config parsing (nested text_config, the reference's derived schedule,
// clear errors), the QAT fake-quantizers, the two-level indexer selection, weight-name coverage,
// and schedule / batch invariance of the forward pass on a random-weight tiny model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v41/indexer.h"
#include "model/deepseek_v41/init_presets.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/deepseek_v41/weight_schema.h"
#include "model/quant_sim.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v41 {
namespace {

// The release's config.json shape (dimensions shrunk where the test does not care).
std::string ReleaseLikeConfig() {
  return R"({
    "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
    "image_token_id": 129264,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [32, 32]},
    "vision_config": {"model_type": "deepseek_v41_vision", "hidden_size": 1024},
    "text_config": {
      "model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120,
      "num_hidden_layers": 40, "num_attention_heads": 64, "head_dim": 512, "q_lora_rank": 1280,
      "qk_rope_head_dim": 64, "o_groups": 8, "o_lora_rank": 1024, "n_routed_experts": 384,
      "num_experts_per_tok": 6, "moe_intermediate_size": 2304, "routed_scaling_factor": 1.5,
      "swiglu_limit": 10.0, "sliding_window": 128, "rms_norm_eps": 1e-20,
      "compress_ratios": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0],
      "num_nextn_predict_layers": 3, "index_n_heads": 32, "index_head_dim": 128,
      "engram_layer_ids": [1, 14], "engram_num_embeddings": [384006168, 384016682],
      "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                       "original_max_position_embeddings": 65536},
      "eos_token_id": [1]
    }
  })";
}

TEST(DeepseekV41Config, ParsesTheNestedReleaseConfig) {
  auto c = io::ParseDeepseekV41Config(ReleaseLikeConfig());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 40);
  EXPECT_EQ(c->compress_ratios.size(), 40u);  // the 3 draft-layer entries dropped
  EXPECT_EQ(c->compress_ratios[19], 2);
  EXPECT_EQ(c->compress_ratios[20], 1);
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int>{2, 8, 14, 20}));
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c->candidate_source_layer_id, 20);
  EXPECT_EQ(c->KvSourceOf(13), 8);
  EXPECT_EQ(c->KvSourceOf(39), 20);
  EXPECT_EQ(c->KvSourceOf(1), -1);
  EXPECT_TRUE(c->has_vision);
  EXPECT_EQ(c->image_token_id, 129264);
  EXPECT_EQ(c->fp8_block_size, 32);
  EXPECT_TRUE(c->compress_yarn.enabled);
  EXPECT_EQ(c->compress_yarn.factor, 16.0);
  EXPECT_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_EQ(c->engram_layer_ids, (std::vector<int>{1, 14}));
  EXPECT_EQ(c->eos_token_id, 1);
}

TEST(DeepseekV41Config, DerivesTheScheduleLikeTheReference) {
  // No compress_ratios for 6 layers: [0, 0] + [2] * ((6 - 2 + 1) / 2) + [1] * rest; a source at
  // the start of each same-ratio run; index sources = kv sources; candidate = the last source.
  auto c =
      io::ParseDeepseekV41Config(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 6})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 2, 2, 1, 1}));
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int>{2, 4}));
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int>{2, 4}));
  EXPECT_EQ(c->candidate_source_layer_id, 4);
  EXPECT_FALSE(c->has_vision);
}

TEST(DeepseekV41Config, RoundTripsThroughJson) {
  auto c = PresetConfig("v41-tiny");
  ASSERT_TRUE(c.ok());
  auto back = io::ParseDeepseekV41Config(io::DeepseekV41ConfigToJson(*c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->compress_ratios, c->compress_ratios);
  EXPECT_EQ(back->kv_source_layer_ids, c->kv_source_layer_ids);
  EXPECT_EQ(back->index_source_layer_ids, c->index_source_layer_ids);
  EXPECT_EQ(back->candidate_source_layer_id, c->candidate_source_layer_id);
  EXPECT_EQ(back->compress_yarn.original_max_position_embeddings, 64.0);
  EXPECT_EQ(back->index_topk, c->index_topk);
}

TEST(DeepseekV41Config, BadConfigsGetClearErrors) {
  auto err = [](const std::string& text) { return io::ParseDeepseekV41Config(text).status(); };
  EXPECT_EQ(err(R"({"model_type": "deepseek_v4"})").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(err(R"({"model_type": "deepseek_v41"})").code(), StatusCode::kInvalidArgument);
  EXPECT_NE(err(R"({"model_type": "deepseek_v41"})").message().find("text_config"),
            std::string::npos);
  // An index source with no KV source before it.
  auto st = err(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 4,
                    "compress_ratios": [0, 2, 2, 2], "kv_source_layer_ids": [2],
                    "index_source_layer_ids": [1, 2]})");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("index_source_layer_ids"), std::string::npos) << st.message();
  // A KV source that is not an index source: accepted by the reference, refused here.
  st = err(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 4,
               "compress_ratios": [0, 2, 2, 2], "kv_source_layer_ids": [1, 3],
               "index_source_layer_ids": [1], "candidate_source_layer_id": -1})");
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.message();
  EXPECT_EQ(err(R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 2,
                    "compress_ratios": [0, 0, 0, 0, 0, 0], "num_nextn_predict_layers": 3})")
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(err(R"({"model_type": "deepseek_v41_text", "hidden_act": "gelu"})").code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(err(R"({"model_type": "deepseek_v41_text", "engram_layer_ids": [1],
                    "engram_num_embeddings": [1, 2]})")
                .code(),
            StatusCode::kInvalidArgument);
  // More index heads than the indexer's score tree holds.
  st = err(R"({"model_type": "deepseek_v41_text", "index_n_heads": 65})");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("index_n_heads = 65"), std::string::npos) << st.message();
}

TEST(DeepseekV41QuantSim, E2m1RoundsTiesToTheEvenCode) {
  EXPECT_EQ(RoundE2m1(0.25f), 0.0f);
  EXPECT_EQ(RoundE2m1(0.26f), 0.5f);
  EXPECT_EQ(RoundE2m1(0.75f), 1.0f);
  EXPECT_EQ(RoundE2m1(1.25f), 1.0f);
  EXPECT_EQ(RoundE2m1(1.75f), 2.0f);
  EXPECT_EQ(RoundE2m1(2.5f), 2.0f);
  EXPECT_EQ(RoundE2m1(3.5f), 4.0f);
  EXPECT_EQ(RoundE2m1(5.0f), 4.0f);
  EXPECT_EQ(RoundE2m1(5.01f), 6.0f);
  EXPECT_EQ(RoundE2m1(-1.75f), -2.0f);
  EXPECT_EQ(Pow2CeilScale(1.0f), 1.0f);
  EXPECT_EQ(Pow2CeilScale(1.5f), 2.0f);
  EXPECT_EQ(Pow2CeilScale(0.3f), 0.5f);
}

TEST(DeepseekV41QuantSim, BlocksLandOnTheGrid) {
  // ue8m0 FP4, block 32: amax 6 -> scale 1, values round onto e2m1.
  std::vector<float> x(32, 0.3f);
  x[0] = 6.0f;
  x[1] = -2.6f;
  Fp4BlockSim(x.data(), 32, 32, false);
  EXPECT_EQ(x[0], 6.0f);
  EXPECT_EQ(x[1], -3.0f);
  EXPECT_EQ(x[2], 0.5f);
  // e4m3 scales, block 16: amax 3 -> scale e4m3(0.5) = 0.5, 1.1 / 0.5 = 2.2 -> 2 -> 1.0.
  std::vector<float> y(16, 1.1f);
  y[5] = 3.0f;
  Fp4BlockSim(y.data(), 16, 16, true);
  EXPECT_EQ(y[5], 3.0f);
  EXPECT_EQ(y[0], 1.0f);
  // A length that is not a multiple of the block is left alone (as the reference does).
  std::vector<float> z = {0.123f, 0.456f, 0.789f};
  Fp4BlockSim(z.data(), 3, 16, true);
  Fp8BlockSim(z.data(), 3, 32);
  EXPECT_EQ(z[0], 0.123f);
  // FP8: amax 1 -> scale 2^ceil(log2(1/448)) = 2^-8; 0.3 = 76.8 * 2^-8 -> e4m3 76 or 80? 76.8
  // lies between 72 and 80 (step 8 in [64, 128)), nearest 80 -> 0.3125.
  std::vector<float> f(32, 0.3f);
  f[0] = 1.0f;
  Fp8BlockSim(f.data(), 32, 32);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 80.0f / 256.0f);
}

TEST(DeepseekV41Indexer, TwoLevelSelection) {
  // 7 visible entries, blocks of 2: block scores max(0,1)=5, max(2,3)=1, max(4,5)=9, {6}=pinned.
  std::vector<float> s = {5, 0, 1, -1, 2, 9, -3};
  auto mask = SelectCandidateBlocks(s, 2, 2);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 1, 1}));  // pinned newest block + best (block 2)
  mask = SelectCandidateBlocks(s, 3, 2);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(SelectTopK(s, 3, nullptr, 2), (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(SelectTopK(s, 3, &mask, 2), (std::vector<int32_t>{0, 4, 5}));
  auto narrow = SelectCandidateBlocks(s, 2, 2);
  EXPECT_EQ(SelectTopK(s, 3, &narrow, 2), (std::vector<int32_t>{4, 5, 6}));
  // Ties go to the lower index.
  EXPECT_EQ(SelectTopK({1, 1, 1, 1}, 2, nullptr, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(SelectCandidateBlocks({}, 2, 2).empty());
}

class DeepseekV41Model : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::SmallV41ModelDir("v41_tiny"));
    auto m = Model::Load(*dir_, {2});
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
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 300);
    return ids;
  }

  static std::vector<float> Run(const std::vector<int32_t>& ids, const std::vector<int>& sizes) {
    return testing::ChunkedLogits(*model_, ids, sizes, LogitsRows::kAll);
  }

  static std::string* dir_;
  static Model* model_;
};
std::string* DeepseekV41Model::dir_ = nullptr;
Model* DeepseekV41Model::model_ = nullptr;

TEST_F(DeepseekV41Model, AllSchedulesGiveIdenticalLogits) {
  // 45 tokens: 22 ratio-2 entries and 45 ratio-1 entries per group (> top-k 4, > 3 candidate
  // blocks of 2), windows of 8.
  const auto ids = Ids(45, 1);
  const auto whole = Run(ids, {45});
  ASSERT_EQ(whole.size(), 45u * 300u);
  for (float v : whole) ASSERT_TRUE(std::isfinite(v));
  for (const auto& [name, sizes] : testing::Schedules(45, 12)) {
    EXPECT_EQ(Run(ids, sizes), whole) << name;
  }
}

TEST_F(DeepseekV41Model, BatchCompositionDoesNotChangeLogits) {
  const auto a = Ids(30, 2), b = Ids(17, 3);
  const auto alone_a = Run(a, {30}), alone_b = Run(b, {17});
  auto sa = model_->NewSequence(), sb = model_->NewSequence();
  auto out = model_->Forward({{sa.get(), a}, {sb.get(), b}}, LogitsRows::kAll);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(std::vector<float>(out->begin(), out->begin() + 30 * 300), alone_a);
  EXPECT_EQ(std::vector<float>(out->begin() + 30 * 300, out->end()), alone_b);
  // One request decoding while another prefills; kLast rows.
  auto sc = model_->NewSequence(), sd = model_->NewSequence();
  ASSERT_TRUE(
      model_
          ->Forward({{sc.get(), std::vector<int32_t>(a.begin(), a.begin() + 29)}}, LogitsRows::kAll)
          .ok());
  auto mixed = model_->Forward({{sd.get(), b}, {sc.get(), {a[29]}}}, LogitsRows::kLast);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(std::vector<float>(mixed->begin() + 300, mixed->end()),
            std::vector<float>(alone_a.end() - 300, alone_a.end()));
  EXPECT_EQ(std::vector<float>(mixed->begin(), mixed->begin() + 300),
            std::vector<float>(alone_b.end() - 300, alone_b.end()));
}

TEST_F(DeepseekV41Model, CompressedBranchChangesTheLogits) {
  // A check that the test above is not vacuous: the late logits depend on tokens far outside
  // the window (only reachable through the compressed entries of the ratio-2 / ratio-1 groups).
  auto ids = Ids(40, 4);
  const auto base = Run(ids, {40});
  ids[3] = (ids[3] + 1) % 300;  // 36 positions before the last token, window 8
  const auto changed = Run(ids, {40});
  EXPECT_NE(std::vector<float>(base.end() - 300, base.end()),
            std::vector<float>(changed.end() - 300, changed.end()));
}

TEST_F(DeepseekV41Model, RollbackThenReplayEqualsFreshRun) {
  // Cuts inside and at the ratio-2 groups' edges; drafts past them emitted entries (ratio 2 and
  // ratio 1) that the rollback must drop, and the open group's inputs must come back.
  const auto ids = Ids(40, 5);
  const auto whole = Run(ids, {40});
  for (int cut : {21, 22, 30, 35}) {
    auto state = model_->NewSequence(/*rollback_slack=*/6);
    auto wrong = ids;
    for (int i = cut; i < 40; ++i) wrong[i] = (wrong[i] + 7) % 300;
    ASSERT_TRUE(
        model_
            ->Forward({{state.get(), std::vector<int32_t>(wrong.begin(), wrong.begin() + cut)}},
                      LogitsRows::kLast)
            .ok());
    const int drafted = std::min(40 - cut, 5);
    ASSERT_TRUE(model_
                    ->Forward({{state.get(), std::vector<int32_t>(wrong.begin() + cut,
                                                                  wrong.begin() + cut + drafted)}},
                              LogitsRows::kLast)
                    .ok());
    ASSERT_TRUE(state->Rollback(cut).ok());
    EXPECT_EQ(state->length(), cut);
    auto out = model_->Forward({{state.get(), std::vector<int32_t>(ids.begin() + cut, ids.end())}},
                               LogitsRows::kAll);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, std::vector<float>(whole.begin() + cut * 300, whole.end())) << "cut " << cut;
  }
  auto state = model_->NewSequence(2);
  ASSERT_TRUE(model_->Forward({{state.get(), ids}}, LogitsRows::kLast).ok());
  EXPECT_EQ(state->Rollback(37).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(state->Rollback(41).code(), StatusCode::kInvalidArgument);
}

TEST_F(DeepseekV41Model, TailRowsAreTheLastRowsOfEachChunk) {
  // A verify chunk's last 3 rows beside a chunk nothing draws from (tail 0).
  const auto a = Ids(12, 6), b = Ids(5, 7);
  const auto alone_a = Run(a, {12});
  auto sa = model_->NewSequence(), sb = model_->NewSequence();
  SequenceChunk ca{sa.get(), a, 3}, cb{sb.get(), b, 0};
  auto out = model_->Forward({ca, cb}, LogitsRows::kTail);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, std::vector<float>(alone_a.end() - 3 * 300, alone_a.end()));
  EXPECT_EQ(sb->length(), 5);
}

TEST(DeepseekV41State, PackedRowsAreTheFakeQuantizedValues) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto [quant, n, block] :
       {std::tuple{KvQuant::kFp8Pow2, 512, 32}, std::tuple{KvQuant::kFp4E4m3, 512, 16},
        std::tuple{KvQuant::kFp4Pow2, 128, 32}, std::tuple{KvQuant::kFp4E4m3, 24, 16}}) {
    const KvFormat f(quant, n, block);
    for (int trial = 0; trial < 20; ++trial) {
      const float scale = std::ldexp(1.0f, trial - 10);
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = normal(rng) * scale;
      if (trial == 3) std::fill(x.begin(), x.begin() + block, 0.0f);  // an all-zero block
      std::vector<float> sim = x;
      if (quant == KvQuant::kFp8Pow2) {
        Fp8BlockSim(sim.data(), n, block);
      } else {
        Fp4BlockSim(sim.data(), n, block, quant == KvQuant::kFp4E4m3);
      }
      std::vector<float> row(static_cast<size_t>(f.row_floats())), back(x.size());
      f.Pack(x.data(), row.data());
      f.Unpack(row.data(), back.data());
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&back[i], &sim[i], sizeof(float)), 0) << i << " " << trial;
        ASSERT_EQ(std::memcmp(&x[i], &sim[i], sizeof(float)), 0) << "Pack quantizes in place";
      }
    }
  }
  // The release's cache rows: 512 FP8 channels + 16 scales, 512 FP4 channels + 32 e4m3 scales
  // (288 bytes), 128 FP4 index channels + 4 scales; rows off the block grid stay fp32.
  EXPECT_EQ(KvFormat(KvQuant::kFp8Pow2, 512, 32).row_floats() * 4, 528);
  EXPECT_EQ(KvFormat(KvQuant::kFp4E4m3, 512, 16).row_floats() * 4, 288);
  EXPECT_EQ(KvFormat(KvQuant::kFp4Pow2, 128, 32).row_floats() * 4, 68);
  EXPECT_FALSE(KvFormat(KvQuant::kFp4E4m3, 24, 16).packed());
  EXPECT_EQ(KvFormat(KvQuant::kFp4E4m3, 24, 16).row_floats(), 24);
}

TEST(DeepseekV41State, OnlyKvSourcesOwnCompressedState) {
  const auto c = testing::SmallV41Config();
  const auto layout = DeepseekV41StateLayout(c, 2);
  std::map<int, std::vector<StateStream>> streams;
  for (const auto& comp : layout.components()) {
    for (const auto& m : comp.members)
      streams[m.layer].push_back(static_cast<StateStream>(m.stream));
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& s = streams[l];
    const bool source = c.IsKvSource(l);
    EXPECT_EQ(std::count(s.begin(), s.end(), StateStream::kWindow), 1) << l;
    EXPECT_EQ(std::count(s.begin(), s.end(), StateStream::kCompressed), source ? 1 : 0) << l;
    EXPECT_EQ(std::count(s.begin(), s.end(), StateStream::kIndexKeys), source ? 1 : 0) << l;
    EXPECT_EQ(std::count(s.begin(), s.end(), StateStream::kCompressorRows),
              source && c.compress_ratios[l] > 1 ? 1 : 0)
        << l;
  }
  // Layer 7 is a Reindex layer (an index source, not a KV source): a window only.
  ASSERT_TRUE(c.IsIndexSource(7) && !c.IsKvSource(7));
  EXPECT_EQ(streams[7].size(), 1u);
  // Per token, the lists grow by the ratio-1 group's entry + key and half of each ratio-2 group's.
  const double entry = 4.0 * EntryFormat(c).row_floats(),
               key = 4.0 * IndexKeyFormat(c).row_floats();
  EXPECT_DOUBLE_EQ(layout.BytesPerToken(), (entry + key) * (1.0 + 0.5 + 0.5));
}

TEST_F(DeepseekV41Model, BadInputsGetClearErrors) {
  auto s = model_->NewSequence();
  auto out = model_->Forward({{s.get(), {1, 300}}}, LogitsRows::kAll);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->length(), 0);
  EXPECT_EQ(model_->Forward({{s.get(), {1}}, {s.get(), {2}}}, LogitsRows::kAll).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(DeepseekV41Weights, SchemaCoversEveryTensorAndNamesTheMissingOne) {
  auto c = std::optional<io::DeepseekV41Config>(testing::SmallV41Config());
  const std::string dir = testing::ScratchDir("v41_schema");
  ASSERT_TRUE(WriteRandomModel(*c, dir, 3).ok());
  auto ckpt = io::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  const auto schema = WeightSchema(*c);
  // The release's module names: sources own a compressor and the indexer's key projection,
  // Reindex layers only the indexer's query side, Reuse layers neither; no ape, no hc_head.
  auto has = [&](const std::string& name) {
    for (const auto& s : schema) {
      if (s.name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("layers.2.attn.compressor.wgate"));
  EXPECT_FALSE(has("layers.6.attn.compressor.wgate"));  // ratio 1: no gate
  EXPECT_TRUE(has("layers.6.attn.compressor.wkv"));
  EXPECT_TRUE(has("layers.6.attn.indexer.wk"));
  EXPECT_TRUE(has("layers.7.attn.indexer.wq_b"));
  EXPECT_FALSE(has("layers.7.attn.indexer.wk"));
  EXPECT_FALSE(has("layers.3.attn.indexer.wq_b"));
  EXPECT_FALSE(has("layers.3.attn.compressor.wkv"));
  EXPECT_TRUE(has("layers.5.ffn.gate.bias_vl"));
  EXPECT_TRUE(has("layers.0.hc_attn_fn"));
  EXPECT_FALSE(has("hc_head_fn"));
  size_t found = 0;
  for (const auto& s : schema) {
    const std::string name = s.kind == TensorKind::kLinear ? s.name + ".weight" : s.name;
    found += (*ckpt)->Find(name) != nullptr;
  }
  EXPECT_EQ(found, schema.size());
  EXPECT_TRUE(IsSkippedTensor("mtp.0.attn.wq_a.weight"));
  EXPECT_TRUE(IsSkippedTensor("vision.blocks.0.attn.qkv.weight"));
  EXPECT_FALSE(IsSkippedTensor("layers.0.attn.wq_a.weight"));

  // Drop one tensor: loading fails naming it.
  io::SafetensorsWriter w;
  for (const auto& s : schema) {
    const std::string name = s.kind == TensorKind::kLinear ? s.name + ".weight" : s.name;
    if (name == "layers.7.attn.indexer.weights_proj.weight") continue;
    const io::TensorView* t = (*ckpt)->Find(name);
    ASSERT_NE(t, nullptr);
    w.Add(name, t->dtype, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes));
  }
  const std::string broken = testing::ScratchDir("v41_broken");
  ASSERT_TRUE(w.Write(broken + "/model.safetensors").ok());
  testing::WriteFile(broken + "/config.json", testing::ReadFile(dir + "/config.json"));
  auto m = Model::Load(broken);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("layers.7.attn.indexer.weights_proj"), std::string::npos)
      << m.status().message();
}

TEST(DeepseekV41Weights, UnbuiltPartsAreRefusedClearly) {
  auto c = std::optional<io::DeepseekV41Config>(testing::SmallV41Config());
  // Image tokens when the config has a vision part.
  io::DeepseekV41Config v = *c;
  v.image_token_id = 250;
  const std::string dir = testing::ScratchDir("v41_vision");
  ASSERT_TRUE(WriteRandomModel(v, dir, 5).ok());
  {
    // Add a vision_config to the written config (the vision tower's weights are skipped).
    std::string text = testing::ReadFile(dir + "/config.json");
    text.insert(text.find('{') + 1, R"("vision_config": {"hidden_size": 8},)");
    testing::WriteFile(dir + "/config.json", text);
  }
  auto m = Model::Load(dir, {1});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto s = (*m)->NewSequence();
  auto out = (*m)->Forward({{s.get(), {1, 250, 3}}}, LogitsRows::kAll);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("image"), std::string::npos) << out.status().message();
  EXPECT_TRUE((*m)->Forward({{s.get(), {1, 249, 3}}}, LogitsRows::kAll).ok());

  // Engram layers without their table sizes: refused naming the field (Engram itself runs:
  // deepseek_v41_engram_test).
  io::DeepseekV41Config e = *c;
  e.engram_layer_ids = {1};
  e.engram_head_dim = 32;
  e.engram_n_heads = 2;
  const std::string edir = testing::ScratchDir("v41_engram");
  ASSERT_TRUE(WriteRandomModel(e, edir, 5).ok());
  auto em = Model::Load(edir);
  EXPECT_EQ(em.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(em.status().message().find("engram_num_embeddings"), std::string::npos)
      << em.status().message();
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v41
