// The release weight formats (FP8 block-scaled dense, FP4 experts): the same weights as their BF16
// dequantization (the loader's dequantization is exact; see quant_test), run with the official
// numerics: the input of every FP8/FP4 linear is quantized to e4m3 per 128 columns (spec §2.12).
#include <gtest/gtest.h>

#include "base/dtype.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/model.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v4 {
namespace {

std::vector<float> Logits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto m = Model::Load(dir, {2});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  auto state = (*m)->NewSequence();
  auto out = (*m)->Forward({{state.get(), ids}}, LogitsRows::kAll);
  EXPECT_TRUE(out.ok());
  return out->logits;
}

TEST(WeightFormatTest, OfficialFp8Fp4QuantizesActivations) {
  const std::vector<int32_t> ids = {5,  17, 250, 3,  3,  99, 120, 7,   8, 9,
                                    10, 11, 12,  13, 14, 15, 16,  200, 1, 2};
  const auto official = Logits(testing::SmallModelDir(WeightFormat::kOfficial, "official"), ids);
  const auto bf16 =
      Logits(testing::SmallModelDir(WeightFormat::kOfficialBf16, "official_bf16"), ids);
  ASSERT_EQ(official.size(), ids.size() * 300);
  // Same weights; only the e4m3 activation rounding (3 mantissa bits) differs: related, not equal.
  EXPECT_NE(official, bf16);
  const double act_err = testing::RelativeError(official, bf16);
  std::printf("official vs its bf16 dequantization: rel err %.3e\n", act_err);
  EXPECT_LT(act_err, 0.35);  // 0.21 on this draw (4 random layers amplify the rounding)
  // And the quantized model is a different model from the unquantized one (the test can fail).
  const auto plain = Logits(testing::SmallModelDir(WeightFormat::kBf16, "plain_bf16"), ids);
  EXPECT_NE(plain, official);
  // Related, though: FP4/FP8 rounding through 4 random layers moves the logits by ~0.4-0.7 of
  // their norm (depends on the draw); unrelated logits would be ~1.4 (sqrt 2) apart.
  EXPECT_LT(testing::RelativeError(official, plain), 1.0);
}

// The FP8-instruction numerics mode (ModelOptions::fp8_mma; backend/wgmma_fp8.h): the FP8 / FP4
// linears multiply the weights' and act_quant's codes as Hopper's FP8 MMA does (13 bits a step,
// promoted to fp32 per 128 columns, FP4 re-expressed per 128-column block). Related to the exact
// products, not equal; every schedule and thread count gives the same bits; weights that are not
// FP8 / FP4 do not change.
TEST(WeightFormatTest, Fp8MmaModeRoundsAsTheInstructions) {
  const std::vector<int32_t> ids = {5,  17, 250, 3,  3,  99, 120, 7,   8, 9,
                                    10, 11, 12,  13, 14, 15, 16,  200, 1, 2};
  const std::string dir = testing::SmallModelDir(WeightFormat::kOfficial, "official");
  auto exact = Model::Load(dir, {2});
  auto mma = Model::Load(dir, {2, io::KvCacheDtype::kAuto, /*fp8_mma=*/true});
  auto mma1 = Model::Load(dir, {1, io::KvCacheDtype::kAuto, /*fp8_mma=*/true});
  ASSERT_TRUE(exact.ok() && mma.ok() && mma1.ok()) << mma.status().ToString();
  const int n = static_cast<int>(ids.size());
  const auto want = testing::ChunkedLogits(**exact, ids, {n}, LogitsRows::kAll);
  const auto got = testing::ChunkedLogits(**mma, ids, {n}, LogitsRows::kAll);
  EXPECT_NE(got, want);
  const double err = testing::RelativeError(got, want);
  std::printf("fp8_mma vs exact products: rel err %.3e\n", err);
  // 0.59 on this draw: each linear is within 1.7e-3 of its output's rms of the exact products
  // (most within 1e-4), the 4 random layers amplify that (position 0: 3.5e-2) and the routers'
  // top-k turn it into other experts at some positions (act_quant's own rounding: 0.21 above).
  // Unrelated logits would be ~1.4 apart. The numerics themselves: wgmma_fp8_model_test.
  EXPECT_LT(err, 1.0);
  EXPECT_EQ(testing::ChunkedLogits(**mma, ids, {7, 1, 5, 7}, LogitsRows::kAll), got);
  EXPECT_EQ(testing::ChunkedLogits(**mma1, ids, std::vector<int>(n, 1), LogitsRows::kAll), got);
  // A model without FP8 / FP4 tensors: the mode changes nothing.
  const std::string plain = testing::SmallModelDir(WeightFormat::kBf16, "plain_bf16");
  auto p0 = Model::Load(plain, {2});
  auto p1 = Model::Load(plain, {2, io::KvCacheDtype::kAuto, /*fp8_mma=*/true});
  ASSERT_TRUE(p0.ok() && p1.ok());
  EXPECT_EQ(testing::ChunkedLogits(**p1, ids, {n}, LogitsRows::kAll),
            testing::ChunkedLogits(**p0, ids, {n}, LogitsRows::kAll));
}

// Matrix::Stack in the mode: like formats keep their codes and per-row scales, row after row; an
// FP8 / FP4 matrix stacked on another format runs on the exact products (its codes dropped).
TEST(WeightFormatTest, Fp8MmaStacking) {
  auto make = [](float v, bool mma) {
    Matrix m;
    m.rows = 1;
    m.cols = 32;
    m.data.assign(32, v);
    m.act_quant = true;
    if (mma) {
      m.mma_e4m3.assign(32, FloatToE4M3(v));
      m.mma_scale.assign(1, 1.0f);
      m.mma_bc = 128;
    }
    return m;
  };
  const Matrix both = Matrix::Stack(make(1.0f, true), make(2.0f, true));
  ASSERT_EQ(both.mma_e4m3.size(), 64u);
  EXPECT_EQ(both.mma_e4m3[40], FloatToE4M3(2.0f));
  EXPECT_EQ(both.mma_scale.size(), 2u);
  EXPECT_EQ(both.view().mma.e4m3, both.mma_e4m3.data());
  const Matrix mixed = Matrix::Stack(make(1.0f, true), make(2.0f, false));
  EXPECT_TRUE(mixed.mma_e4m3.empty());
  EXPECT_EQ(mixed.view().mma.e4m3, nullptr);
  EXPECT_EQ(mixed.rows, 2);
}

TEST(WeightFormatTest, Fp8DenseLoads) {
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  const auto fp8 = Logits(testing::SmallModelDir(WeightFormat::kFp8, "fp8"), ids);
  const auto plain = Logits(testing::SmallModelDir(WeightFormat::kF32, "plain_f32"), ids);
  EXPECT_NE(fp8, plain);
  // FP8 rounding (3 mantissa bits) through 4 random layers: close, not equal.
  EXPECT_LT(testing::RelativeError(fp8, plain), 0.6);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4

namespace dsinfer::model::deepseek_v4 {
namespace {

// tie_word_embeddings: the head reads the embedding. A tied dir computes what an untied dir whose
// head tensor holds the embedding's bytes computes, and differs from the untied original.
TEST(WeightFormatTest, TiedEmbeddingsHeadReadsTheEmbedding) {
  const std::string base = testing::SmallModelDir(WeightFormat::kBf16, "untied");
  const std::string tied = testing::ScratchDir("tied"), copied = testing::ScratchDir("head_copy");
  auto cfg = io::LoadDeepseekV4Config(base);
  ASSERT_TRUE(cfg.ok());
  io::DeepseekV4Config tied_cfg = *cfg;
  tied_cfg.tie_word_embeddings = true;
  testing::WriteFile(tied + "/config.json", io::DeepseekV4ConfigToJson(tied_cfg));
  testing::WriteFile(copied + "/config.json", io::DeepseekV4ConfigToJson(*cfg));
  auto file = io::SafetensorsFile::Open(base + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  io::SafetensorsWriter without_head, head_is_embed;
  ASSERT_EQ((*file)->tensors().count("embed.weight"), 1u);
  const io::TensorView* embed = &(*file)->tensors().at("embed.weight");
  for (const auto& [name, t] : (*file)->tensors()) {
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (name == "head.weight") {
      head_is_embed.Add(name, embed->dtype, embed->shape,
                        std::vector<uint8_t>(embed->data, embed->data + embed->nbytes));
      continue;
    }
    without_head.Add(name, t.dtype, t.shape, bytes);
    head_is_embed.Add(name, t.dtype, t.shape, bytes);
  }
  ASSERT_TRUE(without_head.Write(tied + "/model.safetensors").ok());
  ASSERT_TRUE(head_is_embed.Write(copied + "/model.safetensors").ok());
  const std::vector<int32_t> ids = {3, 14, 15, 92, 65};
  const auto a = Logits(tied, ids), b = Logits(copied, ids), c = Logits(base, ids);
  ASSERT_EQ(a.size(), ids.size() * static_cast<size_t>(cfg->vocab_size));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
