// DeepSeek-V4.1's Engram n-gram memory on the CPU (model/deepseek_v41/engram.h): the hash
// constants against what the reference derives (numpy's generator against its published test
// vectors, the prime bucket layout against the release config's table sizes), the n-gram
// look-back of the hash, and the model with Engram layers (the random-weight v41-tiny-engram preset
// with a 320-id vocabulary): every schedule, batch composition, rollback and fork give identical
// logits (the look-back lives in the sequence state's token ring), an F8_E4M3 table with scales
// gives its dequantized float table's logits, and a missing or inconsistent token map is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "base/dtype.h"
#include "io/safetensors.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/init_presets.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/state_layout.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v41 {
namespace {

TEST(DeepseekV41Engram, NumpyGeneratorMatchesItsDocumentedValues) {
  // numpy's random quick start: default_rng(12345).integers(low=0, high=10, size=3) is [6, 2, 7]
  // and default_rng(12345).random(3) [0.22733602, 0.31675834, 0.79736546]; default_rng(42) and
  // default_rng(0) start their random() streams with 0.7739560485559633 and 0.6369616873214543.
  // random() is (raw >> 11) * 2^-53.
  EXPECT_EQ(NumpyIntegers(12345, 10, 3), (std::vector<uint64_t>{6, 2, 7}));
  auto doubles = [](uint64_t seed, int n) {
    std::vector<double> out;
    for (uint64_t v : NumpyPcg64Raw(seed, n)) out.push_back(static_cast<double>(v >> 11) * 0x1p-53);
    return out;
  };
  const auto a = doubles(12345, 3);
  EXPECT_NEAR(a[0], 0.22733602, 5e-9);
  EXPECT_NEAR(a[1], 0.31675834, 5e-9);
  EXPECT_NEAR(a[2], 0.79736546, 5e-9);
  EXPECT_EQ(doubles(42, 1)[0], 0.7739560485559633);
  EXPECT_EQ(doubles(0, 1)[0], 0.6369616873214543);
  // The 64-bit bounded draw (the multipliers' path) stays within its bound.
  for (uint64_t v : NumpyIntegers(7, uint64_t{1} << 45, 16)) EXPECT_LT(v, uint64_t{1} << 45);
}

TEST(DeepseekV41Engram, MultipliersAreOddBoundedAndPerLayer) {
  const int64_t bound = (std::numeric_limits<int64_t>::max() / 99092) / 2;
  for (int layer : {0, 1, 14}) {
    const auto m = EngramHashMultipliers(layer, 4, 99092);
    ASSERT_EQ(m.size(), 4u);
    for (int64_t v : m) {
      EXPECT_EQ(v % 2, 1);
      EXPECT_GT(v, 0);
      EXPECT_LE(v, 2 * (bound - 1) + 1);
    }
    EXPECT_EQ(m, EngramHashMultipliers(layer, 4, 99092));  // deterministic
  }
  EXPECT_NE(EngramHashMultipliers(1, 4, 99092), EngramHashMultipliers(14, 4, 99092));
}

TEST(DeepseekV41Engram, PrimesAreDrawnInOrderAndNeverReused) {
  io::DeepseekV41Config c;
  c.engram_layer_ids = {0, 2};
  c.engram_vocab_size = 30;
  c.engram_max_ngram_size = 4;
  c.engram_n_heads = 2;
  EXPECT_EQ(EngramPrimes(c), (std::vector<std::vector<int64_t>>{{31, 37, 41, 43, 47, 53},
                                                                {59, 61, 67, 71, 73, 79}}));
  EXPECT_EQ(EngramRowsNeeded(c), (std::vector<int64_t>{252, 410}));
  // The release (layers 1 and 14, 4-grams over 8 heads above 16M): its tables hold exactly the
  // rows the hash addresses (engram_num_embeddings of its config.json).
  c.engram_layer_ids = {1, 14};
  c.engram_vocab_size = 16000000;
  c.engram_n_heads = 8;
  EXPECT_EQ(EngramRowsNeeded(c), (std::vector<int64_t>{384006168, 384016682}));
  std::set<int64_t> all;
  for (const auto& layer : EngramPrimes(c)) all.insert(layer.begin(), layer.end());
  EXPECT_EQ(all.size(), 48u);
}

EngramHasher SmallHasher() {
  io::DeepseekV41Config c = testing::SmallV41EngramConfig();
  std::vector<int32_t> map(static_cast<size_t>(c.vocab_size));
  for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>((i * 7) % 160);
  auto h = EngramHasher::Build(c, map);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return *h;
}

TEST(DeepseekV41Engram, HashesTheNgramsEndingAtEachPosition) {
  const EngramHasher h = SmallHasher();
  ASSERT_EQ(h.layers(), 2);
  ASSERT_EQ(h.cols(), 6);  // 2-, 3- and 4-grams over 2 heads
  EXPECT_EQ(h.pad_id, (2 * 7) % 160);
  const int W = h.layers() * h.cols();
  auto hash = [&](std::vector<int32_t> back) {
    std::vector<int64_t> out(static_cast<size_t>(W));
    h.Hash(back.data(), out.data());
    return out;
  };
  const auto base = hash({5, 6, 7, 8});
  // Each column within its own bucket range; the 2-gram columns by hand.
  for (int l = 0; l < 2; ++l) {
    for (int col = 0; col < 6; ++col) {
      EXPECT_GE(base[l * 6 + col], h.offsets[l][col]);
      EXPECT_LT(base[l * 6 + col], h.offsets[l][col] + h.primes[l][col]);
    }
    const int64_t rolling =
        int64_t{35} * h.multipliers[l][0] ^ int64_t { 42 } * h.multipliers[l][1];
    EXPECT_EQ(base[l * 6 + 0], rolling % h.primes[l][0]);
    EXPECT_EQ(base[l * 6 + 1], rolling % h.primes[l][1] + h.primes[l][0]);
  }
  // The token 3 back reaches only the 4-gram columns; the one 1 back every column.
  const auto far = hash({5, 6, 7, 9});
  const auto near = hash({5, 7, 7, 8});
  for (int l = 0; l < 2; ++l) {
    for (int col = 0; col < 6; ++col) {
      EXPECT_EQ(far[l * 6 + col] != base[l * 6 + col], col >= 4) << l << " " << col;
      EXPECT_NE(near[l * 6 + col], base[l * 6 + col]) << l << " " << col;
    }
  }
  // Tokens that share a compressed id hash alike (i * 7 mod 160: i and i + 160 collide).
  EXPECT_EQ(hash({5 + 160, 6, 7, 8}), base);
  // Before the sequence start the look-back is the pad id, from the first missing token on.
  EXPECT_EQ(hash({5, 6, -1, 9}), hash({5, 6, 2, 2}));
}

class DeepseekV41EngramModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::SmallV41EngramModelDir("v41_engram"));
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
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 320);
    return ids;
  }
  static std::vector<float> Run(const std::vector<int32_t>& ids, const std::vector<int>& sizes) {
    return testing::ChunkedLogits(*model_, ids, sizes, LogitsRows::kAll);
  }
  static constexpr int64_t V = 320;
  static std::string* dir_;
  static Model* model_;
};
std::string* DeepseekV41EngramModel::dir_ = nullptr;
Model* DeepseekV41EngramModel::model_ = nullptr;

TEST_F(DeepseekV41EngramModel, AllSchedulesGiveIdenticalLogits) {
  const auto ids = Ids(45, 1);
  const auto whole = Run(ids, {45});
  ASSERT_EQ(whole.size(), static_cast<size_t>(45 * V));
  for (float v : whole) ASSERT_TRUE(std::isfinite(v));
  for (const auto& [name, sizes] : testing::Schedules(45, 12)) {
    EXPECT_EQ(Run(ids, sizes), whole) << name;
  }
}

TEST_F(DeepseekV41EngramModel, EngramChangesTheLogits) {
  // The same weights with the Engram layers switched off in config.json: other logits, so the
  // schedule checks above are not vacuous.
  const std::string off = testing::ScratchDir("v41_engram_off");
  std::filesystem::copy_file(*dir_ + "/model.safetensors", off + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  io::DeepseekV41Config c = model_->config();
  c.engram_layer_ids.clear();
  c.engram_num_embeddings.clear();
  testing::WriteFile(off + "/config.json", io::DeepseekV41ConfigToJson(c));
  auto plain = Model::Load(off, {2});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const auto ids = Ids(20, 2);
  const auto with = Run(ids, {20});
  const auto without = testing::ChunkedLogits(**plain, ids, {20}, LogitsRows::kAll);
  ASSERT_EQ(with.size(), without.size());
  EXPECT_GT(testing::RelativeError(with, without), 1e-3);
}

TEST_F(DeepseekV41EngramModel, BatchCompositionDoesNotChangeLogits) {
  const auto a = Ids(30, 3), b = Ids(17, 4);
  const auto alone_a = Run(a, {30}), alone_b = Run(b, {17});
  auto sc = model_->NewSequence(), sd = model_->NewSequence();
  ASSERT_TRUE(
      model_
          ->Forward({{sc.get(), std::vector<int32_t>(a.begin(), a.begin() + 26)}}, LogitsRows::kAll)
          .ok());
  // One request prefills while the other continues with a chunk of its last 4 tokens.
  auto mixed = model_->Forward(
      {{sd.get(), b}, {sc.get(), std::vector<int32_t>(a.begin() + 26, a.end())}}, LogitsRows::kAll);
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(std::vector<float>(mixed->begin(), mixed->begin() + 17 * V), alone_b);
  EXPECT_EQ(std::vector<float>(mixed->begin() + 17 * V, mixed->end()),
            std::vector<float>(alone_a.end() - 4 * V, alone_a.end()));
}

TEST_F(DeepseekV41EngramModel, RollbackForkAndStateBytes) {
  const auto ids = Ids(40, 5);
  const auto whole = Run(ids, {40});
  const int slack = 6;
  const cache::StateLayout layout = DeepseekV41StateLayout(model_->config(), slack);
  for (int cut : {1, 2, 21, 30}) {
    auto state = model_->NewSequence(slack);
    auto wrong = ids;
    for (int i = cut; i < 40; ++i) wrong[i] = (wrong[i] + 7) % 320;
    ASSERT_TRUE(
        model_
            ->Forward({{state.get(), std::vector<int32_t>(wrong.begin(), wrong.begin() + cut)}},
                      LogitsRows::kLast)
            .ok());
    ASSERT_TRUE(model_
                    ->Forward({{state.get(), std::vector<int32_t>(wrong.begin() + cut,
                                                                  wrong.begin() + cut + 5)}},
                              LogitsRows::kLast)
                    .ok());
    EXPECT_EQ(state->bytes(), static_cast<size_t>(layout.ExactBytes(cut + 5)));
    ASSERT_TRUE(state->Rollback(cut).ok());
    // A fork of the rolled-back state continues like the original.
    auto fork = model_->NewSequence(slack);
    fork->CopyFrom(*state);
    // The replay in two chunks: the second one's look-back reaches back before the cut.
    for (SequenceState* s : {state.get(), fork.get()}) {
      auto one = model_->Forward({{s, {ids[cut]}}}, LogitsRows::kAll);
      auto rest = model_->Forward({{s, std::vector<int32_t>(ids.begin() + cut + 1, ids.end())}},
                                  LogitsRows::kAll);
      ASSERT_TRUE(one.ok() && rest.ok());
      one->insert(one->end(), rest->begin(), rest->end());
      EXPECT_EQ(*one, std::vector<float>(whole.begin() + cut * V, whole.end())) << "cut " << cut;
    }
  }
}

TEST_F(DeepseekV41EngramModel, Fp8TableGivesItsDequantizedTablesLogits) {
  // Requantize each Engram table to F8_E4M3 rows with one power-of-two scale per 32 channels
  // (F8_E8M0), and write the dequantized values as an F32 table beside it: the same logits.
  auto ckpt = io::Checkpoint::Open(*dir_);
  ASSERT_TRUE(ckpt.ok());
  io::SafetensorsWriter fp8, f32;
  for (const auto& [name, t] : (*ckpt)->tensors()) {
    std::vector<uint8_t> bytes(t->data, t->data + t->nbytes);
    const bool table = name.find(".engram.embed.weight") != std::string::npos;
    if (name.find(".engram.embed.scale") != std::string::npos) continue;
    if (!table) {
      fp8.Add(name, t->dtype, t->shape, bytes);
      f32.Add(name, t->dtype, t->shape, bytes);
      continue;
    }
    ASSERT_EQ(t->dtype, DType::kF32);
    const int64_t rows = t->shape[0], dim = t->shape[1];
    std::vector<float> v(static_cast<size_t>(rows * dim)), deq(v.size());
    std::memcpy(v.data(), t->data, t->nbytes);
    std::vector<uint8_t> codes(v.size()), scales(static_cast<size_t>(rows * dim / 32));
    for (int64_t b = 0; b < rows * dim / 32; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b * 32 + i]));
      scales[b] = Ue8m0ScaleFor(amax, 448.0f, 1e-4f);
      const float s = E8M0ToFloat(scales[b]);
      for (int i = 0; i < 32; ++i) {
        codes[b * 32 + i] = FloatToE4M3(v[b * 32 + i] / s);
        deq[b * 32 + i] = E4M3ToFloat(codes[b * 32 + i]) * s;
      }
    }
    fp8.Add(name, DType::kF8E4M3, t->shape, codes);
    const std::string scale_name = name.substr(0, name.size() - 6) + "scale";
    fp8.Add(scale_name, DType::kF8E8M0, {rows, dim / 32}, scales);
    std::vector<uint8_t> deq_bytes(deq.size() * 4);
    std::memcpy(deq_bytes.data(), deq.data(), deq_bytes.size());
    f32.Add(name, DType::kF32, t->shape, deq_bytes);
  }
  std::vector<std::vector<float>> logits;
  for (auto* w : {&fp8, &f32}) {
    const std::string d = testing::ScratchDir(w == &fp8 ? "v41_engram_fp8" : "v41_engram_deq");
    ASSERT_TRUE(w->Write(d + "/model.safetensors").ok());
    for (const char* f : {"/config.json", "/engram_token_map.json"}) {
      testing::WriteFile(d + f, testing::ReadFile(*dir_ + f));
    }
    auto m = Model::Load(d, {2});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    logits.push_back(testing::ChunkedLogits(**m, Ids(24, 6), {24}, LogitsRows::kAll));
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_NE(logits[0], Run(Ids(24, 6), {24}));  // the requantization did change the table
}

TEST(DeepseekV41Engram, OutOfRangeHashSettingsAreRefused) {
  io::DeepseekV41Config c = testing::SmallV41EngramConfig();
  c.engram_n_heads = 1000000;
  auto parsed = io::ParseDeepseekV41Config(io::DeepseekV41ConfigToJson(c));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("engram_n_heads"), std::string::npos)
      << parsed.status().message();
  c = testing::SmallV41EngramConfig();
  c.engram_max_ngram_size = 1;
  EXPECT_FALSE(c.Validate().ok());
}

TEST_F(DeepseekV41EngramModel, MissingOrInconsistentTokenMapsAreRefused) {
  const std::string d = testing::ScratchDir("v41_engram_map");
  std::filesystem::copy_file(*dir_ + "/model.safetensors", d + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  testing::WriteFile(d + "/config.json", testing::ReadFile(*dir_ + "/config.json"));
  std::filesystem::remove(d + "/engram_token_map.json");
  auto missing = Model::Load(d, {1});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("engram_token_map.json"), std::string::npos);
  testing::WriteFile(d + "/engram_token_map.json",
                     R"({"compressed_vocab_size": 99, "token_map": [0, 1]})");
  auto size = Model::Load(d, {1});
  EXPECT_EQ(size.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(size.status().message().find("engram_compressed_vocab_size"), std::string::npos)
      << size.status().message();
  testing::WriteFile(d + "/engram_token_map.json",
                     R"({"compressed_vocab_size": 160, "token_map": [0, 1]})");
  auto len = Model::Load(d, {1});
  EXPECT_EQ(len.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(len.status().message().find("vocabulary"), std::string::npos) << len.status().message();
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v41
