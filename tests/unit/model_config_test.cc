#include "io/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsinfer::io {
namespace {

// The official V4-Flash inference/config.json spelling (legacy keys), trimmed to 6 layers.
const char* kLegacy = R"({
  "vocab_size": 129280, "dim": 4096, "n_layers": 6, "n_heads": 64, "head_dim": 512,
  "rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
  "n_routed_experts": 256, "n_shared_experts": 1, "n_activated_experts": 6, "moe_inter_dim": 2048,
  "n_hash_layers": 3, "score_func": "sqrtsoftplus", "route_scale": 1.5, "swiglu_limit": 10.0,
  "window_size": 128, "compress_rope_theta": 160000, "rope_theta": 10000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                   "beta_fast": 32, "beta_slow": 1},
  "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "hc_mult": 4,
  "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "norm_eps": 1e-6, "n_mtp_layers": 1,
  "compress_ratios": [0, 0, 4, 128, 4, 128, 0]
})";

// What transformers' save_pretrained writes (modern keys).
const char* kModern = R"({
  "model_type": "deepseek_v4", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 3,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "q_lora_rank": 16,
  "o_groups": 2, "o_lora_rank": 8, "n_routed_experts": 4, "n_shared_experts": 1,
  "num_experts_per_tok": 2, "moe_intermediate_size": 32, "scoring_func": "sqrtsoftplus",
  "routed_scaling_factor": 2.5, "swiglu_limit": 7.0, "sliding_window": 8, "rope_theta": 10000.0,
  "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
  "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
  "mlp_layer_types": ["hash_moe", "moe", "moe"], "partial_rotary_factor": 0.25,
  "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0},
                      "compress": {"rope_type": "yarn", "rope_theta": 5000.0, "factor": 4.0,
                                   "original_max_position_embeddings": 128, "beta_fast": 32,
                                   "beta_slow": 1, "attention_factor": 1.0}},
  "index_n_heads": 2, "index_head_dim": 16, "index_topk": 3, "hc_mult": 3, "hc_sinkhorn_iters": 5,
  "hc_eps": 1e-6, "rms_norm_eps": 1e-6, "num_nextn_predict_layers": 1
})";

TEST(ModelConfigTest, LegacyKeys) {
  auto c = ParseDeepseekV4Config(kLegacy);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->rope_head_dim, 64);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 4, 128, 4, 128}));
  EXPECT_EQ(c->mtp_compress_ratio, 0);
  EXPECT_TRUE(c->IsCsa(2));
  EXPECT_TRUE(c->IsHca(3));
  EXPECT_EQ(c->hash_layers, (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_TRUE(c->compress_yarn.enabled);
  EXPECT_EQ(c->compress_yarn.factor, 16);
  EXPECT_EQ(c->routed_scaling_factor, 1.5);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->num_experts_per_tok, 6);
}

TEST(ModelConfigTest, ModernKeys) {
  auto c = ParseDeepseekV4Config(kModern);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_head_dim, 8);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 16}));
  EXPECT_EQ(c->hash_layers, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(c->compress_rope_theta, 5000.0);
  EXPECT_EQ(c->compress_yarn.original_max_position_embeddings, 128);
  EXPECT_EQ(c->hc_mult, 3);
}

TEST(ModelConfigTest, RoundTripThroughOurWriter) {
  auto c = ParseDeepseekV4Config(kModern);
  ASSERT_TRUE(c.ok());
  auto again = ParseDeepseekV4Config(DeepseekV4ConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->compress_ratios, c->compress_ratios);
  EXPECT_EQ(again->hash_layers, c->hash_layers);
  EXPECT_EQ(again->rope_head_dim, c->rope_head_dim);
  EXPECT_EQ(again->compress_yarn.factor, c->compress_yarn.factor);
}

TEST(ModelConfigTest, BrokenConfigs) {
  EXPECT_EQ(ParseDeepseekV4Config("{not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDeepseekV4Config("[]").status().code(), StatusCode::kInvalidArgument);
  std::string no_dim = kModern;
  no_dim.replace(no_dim.find("\"hidden_size\""), 13, "\"hidden_sizeX\"");
  auto st = ParseDeepseekV4Config(no_dim).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("hidden_size"), std::string::npos);
  std::string wrong_type = kModern;
  wrong_type.replace(wrong_type.find("\"hc_mult\": 3"), 12, "\"hc_mult\": \"x\"");
  EXPECT_EQ(ParseDeepseekV4Config(wrong_type).status().code(), StatusCode::kInvalidArgument);
  std::string bad_heads = kModern;
  bad_heads.replace(bad_heads.find("\"o_groups\": 2"), 13, "\"o_groups\": 3");
  EXPECT_EQ(ParseDeepseekV4Config(bad_heads).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadDeepseekV4Config("/nonexistent").status().code(), StatusCode::kNotFound);
}

// kModern with `key` set to `value` (a JSON text; "null" removes nothing, it sets null).
std::string With(const char* base, const std::string& key, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(base);
  nlohmann::json* at = &j;
  std::string rest = key;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
    at = &(*at)[rest.substr(0, dot)];
  }
  (*at)[rest] = nlohmann::json::parse(value);
  return j.dump();
}

// Keys that change the math of another model are refused, naming the key and the value.
TEST(ModelConfigTest, RefusesWhatWeDoNotCompute) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hidden_act", "\"gelu\""},
      {"attention_bias", "true"},
      {"mlp_bias", "true"},
      {"num_key_value_heads", "4"},
      {"rope_parameters.main.rope_type", "\"linear\""},
      {"quantization_config", R"({"quant_method": "awq"})"},
      {"quantization_config", R"({"quant_method": "fp8", "fmt": "e5m2"})"},
  };
  for (const auto& [key, value] : cases) {
    const auto c = ParseDeepseekV4Config(With(kModern, key, value));
    ASSERT_FALSE(c.ok()) << key << " = " << value;
    EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented) << key;
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_NE(c.status().message().find(leaf == "quantization_config" ? "quant" : leaf),
              std::string::npos)
        << c.status().message();
  }
  // The values V4 computes with, and keys that do not change the math, load.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"hidden_act", "\"silu\""},
           {"attention_bias", "false"},
           {"num_key_value_heads", "1"},
           {"quantization_config", R"({"quant_method": "fp8", "fmt": "e4m3",
                                       "scale_fmt": "ue8m0", "weight_block_size": [128, 128]})"},
           {"initializer_range", "0.02"},
           {"transformers_version", "\"5.17.0\""},
           {"some_unknown_key", "[1, 2]"}}) {
    EXPECT_TRUE(ParseDeepseekV4Config(With(kModern, key, value)).ok()) << key;
  }
}

// Impossible values are refused with the key and the value in the message.
TEST(ModelConfigTest, RefusesImpossibleValues) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"num_nextn_predict_layers", "-1"}, {"hc_eps", "-1"},
      {"rms_norm_eps", "-0.5"},           {"rms_norm_eps", "0"},
      {"eos_token_id", "999999999"},      {"bos_token_id", "-2"},
      {"num_hash_layers", "-1"},          {"index_n_heads", "65"},
  };
  for (const auto& [key, value] : cases) {
    std::string text = With(kModern, key, value);
    if (key == "num_hash_layers") {  // read only without mlp_layer_types
      nlohmann::json j = nlohmann::json::parse(text);
      j.erase("mlp_layer_types");
      text = j.dump();
    }
    const auto c = ParseDeepseekV4Config(text);
    ASSERT_FALSE(c.ok()) << key << " = " << value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
  }
}

TEST(ModelConfigTest, TieWordEmbeddingsIsRead) {
  EXPECT_FALSE(ParseDeepseekV4Config(kModern)->tie_word_embeddings);
  const auto c = ParseDeepseekV4Config(With(kModern, "tie_word_embeddings", "true"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(ParseDeepseekV4Config(DeepseekV4ConfigToJson(*c))->tie_word_embeddings);
}

}  // namespace
}  // namespace dsinfer::io
