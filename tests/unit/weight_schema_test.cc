// The weight schema: a written model holds exactly the schema's tensors (names, shapes) in every
// weight format; the FP8 / FP4 pairing of a linear and the tid2eid reading refuse damaged
// checkpoints with the tensor's name.
#include "model/deepseek_v4/weight_schema.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "io/safetensors.h"
#include "model/deepseek_v4/init_presets.h"
#include "model_test_util.h"

namespace dsinfer::model::deepseek_v4 {
namespace {

TEST(WeightSchemaTest, WrittenModelsHoldExactlyTheSchema) {
  const auto config = testing::SmallConfig();
  const std::vector<TensorSpec> schema = WeightSchema(config);
  for (WeightFormat f :
       {WeightFormat::kF32, WeightFormat::kBf16, WeightFormat::kFp8, WeightFormat::kOfficial}) {
    const std::string dir = testing::SmallModelDir(f, "schema_" + std::to_string(int(f)));
    auto ckpt = io::Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    std::set<std::string> expected, found;
    for (const TensorSpec& t : schema) {
      expected.insert(t.kind == TensorKind::kLinear ? t.name + ".weight" : t.name);
      if (t.kind == TensorKind::kLinear) {
        auto lt = FindLinear(**ckpt, t, config.fp8_block_size > 0 ? config.fp8_block_size : 128);
        ASSERT_TRUE(lt.ok()) << t.name << ": " << lt.status().ToString();
        if (lt->quantized()) expected.insert(t.name + ".scale");
        // The release classes: FP8 dense linears, FP4 routed experts, BF16 plain ones.
        if (f == WeightFormat::kOfficial) {
          const LinearStorage want = t.linear == LinearClass::kQuantized ? LinearStorage::kFp8
                                     : t.linear == LinearClass::kExpert  ? LinearStorage::kFp4
                                                                         : LinearStorage::kBf16;
          EXPECT_EQ(static_cast<int>(lt->storage), static_cast<int>(want)) << t.name;
        }
      } else {
        auto v = (*ckpt)->GetChecked(t.name, t.shape);
        EXPECT_TRUE(v.ok()) << t.name << ": " << v.status().ToString();
      }
    }
    for (const auto& [name, view] : (*ckpt)->tensors()) found.insert(name);
    EXPECT_EQ(found, expected) << "format " << int(f);
  }
  // Every name once; layers in order; MTP after the blocks.
  std::set<std::string> names;
  int last_layer = -1;
  for (const TensorSpec& t : schema) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    EXPECT_GE(t.layer, last_layer) << t.name;
    last_layer = t.layer;
  }
  EXPECT_EQ(last_layer, config.num_layers + config.num_mtp_layers - 1);
}

TEST(WeightSchemaTest, TiedEmbeddingsHaveNoHead) {
  auto config = testing::SmallConfig();
  config.tie_word_embeddings = true;
  WeightSchemaIndex index(config);
  for (const TensorSpec& t : index.all()) EXPECT_NE(t.name, "head");
  EXPECT_EQ(index.Get("embed").shape,
            (std::vector<int64_t>{config.vocab_size, config.hidden_size}));
}

// A checkpoint dir with one tensor set (plus a config-free layout: FindLinear needs none).
std::unique_ptr<io::Checkpoint> OneTensorCheckpoint(
    const std::string& name,
    const std::vector<std::pair<std::string, std::pair<DType, std::vector<int64_t>>>>& tensors) {
  io::SafetensorsWriter w;
  for (const auto& [key, spec] : tensors) {
    int64_t n = 1;
    for (int64_t d : spec.second) n *= d;
    const size_t elem = spec.first == DType::kF32 || spec.first == DType::kI32 ? 4
                        : spec.first == DType::kI64                            ? 8
                        : spec.first == DType::kBF16                           ? 2
                                                                               : 1;
    w.Add(key, spec.first, spec.second, std::vector<uint8_t>(static_cast<size_t>(n) * elem, 0));
  }
  const std::string dir = testing::ScratchDir("schema_ckpt_" + name);
  EXPECT_TRUE(w.Write(dir + "/model.safetensors").ok());
  auto ckpt = io::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  return std::move(ckpt).value();
}

TEST(WeightSchemaTest, FindLinearRefusesDamagedPairs) {
  TensorSpec spec;
  spec.name = "w";
  spec.kind = TensorKind::kLinear;
  spec.linear = LinearClass::kQuantized;
  spec.shape = {256, 256};
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::pair<DType, std::vector<int64_t>>>> tensors;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"missing", {}, "w.weight"},
      {"fp8_no_scale", {{"w.weight", {DType::kF8E4M3, {256, 256}}}}, "no scale"},
      {"fp8_bad_scale_size",
       {{"w.weight", {DType::kF8E4M3, {256, 256}}}, {"w.scale", {DType::kF8E8M0, {2, 3}}}},
       "does not fit"},
      {"fp8_bad_scale_dtype",
       {{"w.weight", {DType::kF8E4M3, {256, 256}}}, {"w.scale", {DType::kBF16, {2, 2}}}},
       "F8_E8M0 or F32"},
      {"fp4_f32_scale",
       {{"w.weight", {DType::kI8, {256, 128}}}, {"w.scale", {DType::kF32, {256, 8}}}},
       "ue8m0"},
      {"fp8_wrong_shape", {{"w.weight", {DType::kF8E4M3, {256, 128}}}}, "expected [256, 256]"},
      {"bf16_wrong_shape", {{"w.weight", {DType::kBF16, {128, 256}}}}, "expected [256, 256]"},
      {"bad_dtype", {{"w.weight", {DType::kI64, {256, 256}}}}, "unsupported dtype"},
  };
  for (const Case& c : cases) {
    auto ckpt = OneTensorCheckpoint(c.what, c.tensors);
    auto t = FindLinear(*ckpt, spec, 128);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_NE(t.status().message().find(c.message), std::string::npos)
        << c.what << ": " << t.status().message();
  }
  // The well-formed pairs load: FP8 with ue8m0 and with F32 block scales, FP4 with per-32 ue8m0.
  auto fp8 = OneTensorCheckpoint("fp8_ok", {{"w.weight", {DType::kF8E4M3, {256, 256}}},
                                            {"w.weight_scale_inv", {DType::kF32, {2, 2}}}});
  auto t8 = FindLinear(*fp8, spec, 128);
  ASSERT_TRUE(t8.ok()) << t8.status().ToString();
  EXPECT_TRUE(t8->scale_f32);
  auto fp4 = OneTensorCheckpoint(
      "fp4_ok", {{"w.weight", {DType::kI8, {256, 128}}}, {"w.scale", {DType::kF8E8M0, {256, 8}}}});
  auto t4 = FindLinear(*fp4, spec, 128);
  ASSERT_TRUE(t4.ok()) << t4.status().ToString();
  EXPECT_EQ(static_cast<int>(t4->storage), static_cast<int>(LinearStorage::kFp4));
}

TEST(WeightSchemaTest, Tid2eidIdsMustBeExperts) {
  TensorSpec spec;
  spec.name = "gate.tid2eid";
  spec.kind = TensorKind::kTid2eid;
  spec.shape = {4, 2};
  io::SafetensorsWriter w;
  std::vector<uint8_t> bytes(4 * 2 * 8, 0);
  bytes[5 * 8] = 9;  // id 9 with 8 experts
  w.Add("gate.tid2eid", DType::kI64, {4, 2}, bytes);
  const std::string dir = testing::ScratchDir("schema_tid2eid");
  ASSERT_TRUE(w.Write(dir + "/model.safetensors").ok());
  auto ckpt = io::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  auto bad = ReadTid2eid(**ckpt, spec, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expert id 9"), std::string::npos);
  auto good = ReadTid2eid(**ckpt, spec, 10);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ((*good)[5], 9);
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4
