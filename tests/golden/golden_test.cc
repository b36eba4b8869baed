// The CPU model against the transformers reference (single-shot, float32, use_cache=False) on the
// configs of tools/make_golden.py: whole-prompt, odd-chunk and prefill-then-decode schedules must all
// reproduce the reference logits to max|Δ|/max|ref| <= 1e-4. The model dirs are exactly what
// transformers' save_pretrained wrote.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/npy.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/rope_table.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v4 {
namespace {

std::string Dir(const std::string& name) {
  return std::string(DSINFER_SOURCE_DIR) + "/tests/data/golden/" + name;
}

std::vector<int32_t> Ids(const std::string& dir) {
  std::ifstream in(dir + "/ids.json");
  auto j = nlohmann::json::parse(in);
  return j["ids"].get<std::vector<int32_t>>();
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = Dir(GetParam());
    auto m = Model::Load(dir_, {2});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    ids_ = Ids(dir_);
    auto ref = io::ReadNpyF32(dir_ + "/logits.npy");
    ASSERT_TRUE(ref.ok());
    ASSERT_EQ(ref->shape, (std::vector<int64_t>{static_cast<int64_t>(ids_.size()), model_->config().vocab_size}));
    ref_ = ref->data;
  }

  std::vector<float> Run(const std::vector<int>& sizes) {
    return testing::ChunkedLogits(*model_, ids_, sizes, LogitsRows::kAll);
  }

  void ExpectMatches(const std::vector<int>& sizes, const std::string& what) {
    const auto got = Run(sizes);
    const double err = testing::RelativeError(got, ref_);
    EXPECT_LE(err, 1e-4) << GetParam() << " " << what;
    // Top-1 agreement is reported for context; the bound above is the contract.
    const int64_t V = model_->config().vocab_size;
    const auto top = testing::ArgmaxRows(got, V), ref_top = testing::ArgmaxRows(ref_, V);
    int agree = 0;
    for (size_t t = 0; t < top.size(); ++t) agree += top[t] == ref_top[t];
    RecordProperty(what + "_rel_err", std::to_string(err));
    std::printf("%s %-28s rel err %.3e, top-1 %d/%zu\n", GetParam().c_str(), what.c_str(), err, agree,
                ids_.size());
  }

  std::string dir_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> ids_;
  std::vector<float> ref_;
};

TEST_P(GoldenTest, WholePrompt) { ExpectMatches({static_cast<int>(ids_.size())}, "whole prompt"); }

TEST_P(GoldenTest, OddChunks) {
  std::vector<int> sizes;
  const int pattern[] = {7, 13, 1, 29, 2, 3};
  int left = static_cast<int>(ids_.size());
  for (int i = 0; left > 0; ++i) {
    sizes.push_back(std::min(left, pattern[i % 6]));
    left -= sizes.back();
  }
  ExpectMatches(sizes, "odd chunks");
}

TEST_P(GoldenTest, PrefillThenDecode) {
  const int n = static_cast<int>(ids_.size());
  std::vector<int> sizes = {n / 3};
  for (int i = n / 3; i < n; ++i) sizes.push_back(1);
  ExpectMatches(sizes, "prefill then decode");
}

TEST_P(GoldenTest, TokenByToken) {
  ExpectMatches(std::vector<int>(ids_.size(), 1), "token by token");
}

TEST_P(GoldenTest, RopeTablesMatchReference) {
  std::ifstream in(dir_ + "/inv_freq.json");
  auto j = nlohmann::json::parse(in);
  auto tables = RopeTables::Build(model_->config());
  for (const char* key : {"main", "compress"}) {
    auto ref = j[key].get<std::vector<float>>();
    const auto& ours = std::string(key) == "main" ? tables.main : tables.compress;
    ASSERT_EQ(ours.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(ours[i], ref[i], 2e-7 * std::abs(ref[i])) << key << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, GoldenTest, ::testing::Values("A", "B"));

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
