// The config.json readings and writings both model families' configs share (model_config.cc for
// DeepSeek-V4, deepseek_v41_config.cc for DeepSeek-V4.1): typed key reads with clear errors, the
// compress table's YaRN, reading a model dir's config.json, and the keys whose meaning is the same
// in both. Internal to io/. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "io/model_config.h"

namespace dsinfer::io {

// Reads the first present (non-null) key among `keys` into `out`; InvalidArgument naming the key
// if its type is wrong or an integer is out of T's range; with `required`, InvalidArgument when
// none is present.
template <typename T>
Status ReadKey(const nlohmann::json& j, std::initializer_list<const char*> keys, T* out,
               bool required) {
  using json = nlohmann::json;
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) throw json::type_error::create(302, "not a boolean", nullptr);
        *out = it->get<T>();
      } else if constexpr (std::is_integral_v<T>) {
        // An integer that T holds (a float or an out-of-range integer would convert with UB).
        if (!it->is_number_integer())
          throw json::type_error::create(302, "not an integer", nullptr);
        if (it->is_number_unsigned()
                ? it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                : (it->get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                   it->get<int64_t>() > static_cast<int64_t>(std::numeric_limits<T>::max()))) {
          return InvalidArgument(std::string("config.json: key '") + key + "' = " + it->dump() +
                                 " is out of range");
        }
        *out = static_cast<T>(it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>())
                                                       : it->get<int64_t>());
      } else if constexpr (std::is_arithmetic_v<T>) {
        if (!it->is_number()) throw json::type_error::create(302, "not a number", nullptr);
        *out = it->get<T>();
      } else {
        *out = it->get<T>();
      }
    } catch (const json::exception&) {
      return InvalidArgument(std::string("config.json: key '") + key + "' has the wrong type");
    }
    return Status::Ok();
  }
  if (required) {
    std::string names;
    for (const char* key : keys) names += std::string(names.empty() ? "" : " / ") + key;
    return InvalidArgument("config.json: missing required key " + names);
  }
  return Status::Ok();
}

// The compress table's RoPE scaling (`rope_scaling`, or `rope_parameters.compress`): "default" or
// YaRN (factor and original_max_position_embeddings required); `model` names the family in the
// errors.
Status ReadYarn(const nlohmann::json& rp, YarnParams* yarn, const char* model);

// index_n_heads above kMaxIndexHeads: InvalidArgument with the value; else Ok.
Status CheckIndexHeads(int index_n_heads);

// <dir>/config.json's text (NotFound when unreadable).
StatusOr<std::string> ReadConfigText(const std::string& model_dir);
// A parse error of <dir>/config.json as the model dir's data error: InvalidArgument becomes
// DataLoss (exit 1, not a usage error), prefixed with the file's path.
Status ConfigFileError(const std::string& model_dir, const Status& parse_error);

// The keys whose meaning both families share: dimensions, MoE, window, RoPE (+ YaRN as
// rope_scaling), indexer, mHC, norms, special ids.
template <typename Config>
void WriteSharedKeys(const Config& c, nlohmann::json* out) {
  nlohmann::json& j = *out;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["scoring_func"] = c.scoring_func;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hidden_act"] = "silu";
  j["sliding_window"] = c.sliding_window;
  j["rope_theta"] = c.rope_theta;
  j["compress_rope_theta"] = c.compress_rope_theta;
  if (c.compress_yarn.enabled) {
    j["rope_scaling"] = {
        {"type", "yarn"},
        {"factor", c.compress_yarn.factor},
        {"original_max_position_embeddings", c.compress_yarn.original_max_position_embeddings},
        {"beta_fast", c.compress_yarn.beta_fast},
        {"beta_slow", c.compress_yarn.beta_slow}};
  }
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
}

}  // namespace dsinfer::io
