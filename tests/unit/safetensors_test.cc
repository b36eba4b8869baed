#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"

namespace dsinfer::io {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

std::string Header(const std::string& json, const std::string& data) {
  std::string s(8, '\0');
  uint64_t n = json.size();
  std::memcpy(s.data(), &n, 8);
  return s + json + data;
}

TEST(SafetensorsTest, WriteThenReadZeroCopy) {
  const std::string dir = ScratchDir("st_roundtrip");
  SafetensorsWriter w;
  w.AddF32("model.a", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.Add("b", DType::kBF16, {2}, {0x80, 0x3f, 0x00, 0xc0});
  ASSERT_TRUE(w.Write(dir + "/model.safetensors").ok());
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  auto a = (*ckpt)->GetChecked("a", {2, 3});  // "model." prefix dropped
  ASSERT_TRUE(a.ok());
  float v[6];
  std::memcpy(v, (*a)->data, 24);
  EXPECT_EQ(v[5], 6.0f);
  auto b = (*ckpt)->Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->dtype, DType::kBF16);
  EXPECT_EQ((*ckpt)->GetChecked("a", {3, 2}).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ((*ckpt)->Get("missing").status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsTest, MultiShardIndex) {
  const std::string dir = ScratchDir("st_shards");
  SafetensorsWriter w1, w2;
  w1.AddF32("x", {1}, {1});
  w2.AddF32("y", {1}, {2});
  ASSERT_TRUE(w1.Write(dir + "/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(w2.Write(dir + "/model-00002-of-00002.safetensors").ok());
  WriteFile(dir + "/model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                "y": "model-00002-of-00002.safetensors"}})");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_NE((*ckpt)->Find("x"), nullptr);
  EXPECT_NE((*ckpt)->Find("y"), nullptr);
  // An index naming a tensor the shard lacks is damage, not a silent skip.
  WriteFile(dir + "/model.safetensors.index.json",
            R"({"weight_map": {"x": "model-00001-of-00002.safetensors", "z": "model-00001-of-00002.safetensors"}})");
  EXPECT_EQ(Checkpoint::Open(dir).status().code(), StatusCode::kDataLoss);
}

struct BadCase {
  const char* name;
  std::string bytes;
  StatusCode code;
};

TEST(SafetensorsTest, DamagedFilesGiveClearErrors) {
  const std::string dir = ScratchDir("st_bad");
  const std::vector<BadCase> cases = {
      {"truncated", "abc", StatusCode::kDataLoss},
      {"header_past_end", Header(R"({"a": 1})", "").substr(0, 12), StatusCode::kDataLoss},
      {"unparseable", Header("{not json", ""), StatusCode::kDataLoss},
      {"unknown_dtype", Header(R"({"a": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}})", "x"),
       StatusCode::kDataLoss},
      {"data_past_end", Header(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", "1234"),
       StatusCode::kDataLoss},
      {"size_mismatch", Header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", "1234"),
       StatusCode::kDataLoss},
      {"bad_entry", Header(R"({"a": {"dtype": "F32"}})", ""), StatusCode::kDataLoss},
  };
  for (const auto& c : cases) {
    const std::string path = dir + "/" + c.name + ".safetensors";
    WriteFile(path, c.bytes);
    auto f = SafetensorsFile::Open(path);
    ASSERT_FALSE(f.ok()) << c.name;
    EXPECT_EQ(f.status().code(), c.code) << c.name << ": " << f.status().ToString();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << "error names the file";
  }
  EXPECT_EQ(SafetensorsFile::Open(dir + "/nope.safetensors").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace dsinfer::io

namespace dsinfer::io {
namespace {

TEST(SafetensorsTest, TransformersSpellingsMapToOfficialNames) {
  EXPECT_EQ(NormalizeTensorName("model.embed_tokens.weight"), "embed.weight");
  EXPECT_EQ(NormalizeTensorName("head.weight"), "head.weight");
  EXPECT_EQ(NormalizeTensorName("lm_head.weight"), "head.weight");
  EXPECT_EQ(NormalizeTensorName("model.hc_head.hc_fn"), "hc_head_fn");
  EXPECT_EQ(NormalizeTensorName("model.layers.3.attn.norm.weight"), "layers.3.attn.kv_norm.weight");
  EXPECT_EQ(NormalizeTensorName("model.layers.3.attn.compressor.norm.weight"),
            "layers.3.attn.compressor.norm.weight");
  EXPECT_EQ(NormalizeTensorName("layers.0.attn.kv_norm.weight"), "layers.0.attn.kv_norm.weight");
  EXPECT_EQ(NormalizeTensorName("model.norm.weight"), "norm.weight");
}

}  // namespace
}  // namespace dsinfer::io
