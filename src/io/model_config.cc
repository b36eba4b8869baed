#include "io/model_config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/config_json.h"

namespace dsinfer::io {

using json = nlohmann::json;

namespace {

// Keys that would change the math of another model: each must be absent (null) or hold the one
// value DeepSeek-V4 computes with; any other value is refused (Unimplemented naming the key and
// the value) rather than run as if it were V4. The keys read for the math are those of Parse()
// below (modern and legacy spellings); keys that do not change it (architectures,
// initializer_range, transformers_version, torch_dtype, unknown extra keys, ...) are ignored.
struct FixedKey {
  const char* key;
  json value;  // the one value we compute with
};
const std::vector<FixedKey>& FixedKeys() {
  static const std::vector<FixedKey> keys = {
      {"hidden_act", "silu"},                                    // the experts' SwiGLU
      {"attention_bias", false},                                 // no bias in any projection
      {"mlp_bias", false},          {"num_key_value_heads", 1},  // one shared K=V head (MQA)
      {"attention_dropout", 0.0},                                // inference: no dropout
      {"use_sliding_window", true},                              // the window is always on
  };
  return keys;
}

Status CheckFixedKeys(const json& j) {
  for (const FixedKey& f : FixedKeys()) {
    auto it = j.find(f.key);
    if (it == j.end() || it->is_null()) continue;
    const bool same = it->is_number() && f.value.is_number()
                          ? it->get<double>() == f.value.get<double>()
                          : *it == f.value;
    if (!same) {
      return Unimplemented(std::string("config.json: ") + f.key + " = " + it->dump() +
                           " is not supported (DeepSeek-V4 computes with " + f.value.dump() + ")");
    }
  }
  return Status::Ok();
}

// rope_parameters.main (or a flat rope_parameters): the main RoPE is plain (no scaling).
Status CheckMainRope(const json& rp) {
  const std::string type = rp.value("rope_type", rp.value("type", std::string("default")));
  if (type != "default") {
    return Unimplemented("config.json: rope_parameters.main rope_type '" + type +
                         "' is not supported (the main RoPE of DeepSeek-V4 is 'default')");
  }
  return Status::Ok();
}

Status CheckQuantization(const json& q) {
  if (q.contains("quant_method") && !q["quant_method"].is_null()) {
    const json& m = q["quant_method"];
    if (!m.is_string() || m.get<std::string>() != "fp8") {
      return Unimplemented("config.json: quantization_config.quant_method " + m.dump() +
                           " is not supported (known: \"fp8\", the release's FP8 block scales)");
    }
  }
  if (q.contains("fmt") && q["fmt"].is_string() && q["fmt"] != "e4m3") {
    return Unimplemented("config.json: quantization_config.fmt " + q["fmt"].dump() +
                         " is not supported (known: \"e4m3\")");
  }
  if (q.contains("scale_fmt") && q["scale_fmt"].is_string() && q["scale_fmt"] != "ue8m0") {
    return Unimplemented("config.json: quantization_config.scale_fmt " + q["scale_fmt"].dump() +
                         " is not supported (known: \"ue8m0\")");
  }
  return Status::Ok();
}

StatusOr<DeepseekV4Config> Parse(const json& j) {
  DeepseekV4Config c;
  if (!j.is_object()) return InvalidArgument("config.json: top level is not an object");
  DSINFER_RETURN_IF_ERROR(CheckFixedKeys(j));
  if (j.contains("model_type") && j["model_type"].is_string() &&
      j["model_type"] != "deepseek_v4") {
    return Unimplemented("config.json: model_type '" + j["model_type"].get<std::string>() +
                         "' is not deepseek_v4");
  }
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"vocab_size"}, &c.vocab_size, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"hidden_size", "dim"}, &c.hidden_size, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"num_hidden_layers", "n_layers"}, &c.num_layers, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"num_attention_heads", "n_heads"}, &c.num_heads, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"head_dim"}, &c.head_dim, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"q_lora_rank"}, &c.q_lora_rank, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"o_groups"}, &c.o_groups, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"o_lora_rank"}, &c.o_lora_rank, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"n_routed_experts"}, &c.n_routed_experts, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"n_shared_experts"}, &c.n_shared_experts, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(j, {"num_experts_per_tok", "n_activated_experts"}, &c.num_experts_per_tok, true));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(j, {"moe_intermediate_size", "moe_inter_dim"}, &c.moe_intermediate_size, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"scoring_func", "score_func"}, &c.scoring_func, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"norm_topk_prob"}, &c.norm_topk_prob, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(j, {"routed_scaling_factor", "route_scale"}, &c.routed_scaling_factor, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"swiglu_limit"}, &c.swiglu_limit, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"sliding_window", "window_size"}, &c.sliding_window, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"rope_theta"}, &c.rope_theta, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"compress_rope_theta"}, &c.compress_rope_theta, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(j, {"max_position_embeddings", "max_seq_len"}, &c.max_position_embeddings, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"index_n_heads"}, &c.index_n_heads, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"index_head_dim"}, &c.index_head_dim, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"index_topk"}, &c.index_topk, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"hc_mult"}, &c.hc_mult, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"hc_sinkhorn_iters"}, &c.hc_sinkhorn_iters, true));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"hc_eps"}, &c.hc_eps, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"rms_norm_eps", "norm_eps"}, &c.rms_norm_eps, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(j, {"num_nextn_predict_layers", "n_mtp_layers"}, &c.num_mtp_layers, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"bos_token_id"}, &c.bos_token_id, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"tie_word_embeddings"}, &c.tie_word_embeddings, false));
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty()) {
    const json first = {{"eos_token_id", j["eos_token_id"][0]}};
    DSINFER_RETURN_IF_ERROR(ReadKey(first, {"eos_token_id"}, &c.eos_token_id, true));
  } else {
    DSINFER_RETURN_IF_ERROR(ReadKey(j, {"eos_token_id"}, &c.eos_token_id, false));
  }

  // The layer schedule below indexes by these: refuse impossible counts first.
  if (c.num_layers <= 0 || c.num_layers > 4096) {
    return InvalidArgument("config.json: num_hidden_layers = " + std::to_string(c.num_layers) +
                           " must be in [1, 4096]");
  }
  if (c.num_mtp_layers < 0 || c.num_mtp_layers > 16) {
    return InvalidArgument("config.json: num_nextn_predict_layers = " +
                           std::to_string(c.num_mtp_layers) + " must be in [0, 16]");
  }
  // RoPE dims: legacy qk_rope_head_dim / rope_head_dim, else partial_rotary_factor * head_dim.
  double partial = 0;
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"qk_rope_head_dim", "rope_head_dim"}, &c.rope_head_dim, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(j, {"partial_rotary_factor"}, &partial, false));
  if (partial < 0 || partial > 1) {
    return InvalidArgument("config.json: partial_rotary_factor = " + std::to_string(partial) +
                           " must be in (0, 1]");
  }
  if (c.rope_head_dim == 0) c.rope_head_dim = partial > 0 ? int(c.head_dim * partial) : 64;

  // Compression schedule: legacy compress_ratios (may include the MTP entry) or layer_types.
  std::map<std::string, int> rates = {{"compressed_sparse_attention", 4},
                                      {"heavily_compressed_attention", 128}};
  if (j.contains("compress_rates") && j["compress_rates"].is_object()) {
    for (auto& [k, v] : j["compress_rates"].items()) {
      int rate = 0;
      DSINFER_RETURN_IF_ERROR(ReadKey(j["compress_rates"], {k.c_str()}, &rate, true));
      rates[k] = rate;
    }
  }
  for (const auto& [key, name] :
       {std::pair<const char*, const char*>{"compress_rate_csa", "compressed_sparse_attention"},
        {"compress_rate_hca", "heavily_compressed_attention"}}) {
    int rate = 0;
    if (j.contains(key)) {
      DSINFER_RETURN_IF_ERROR(ReadKey(j, {key}, &rate, true));
      rates[name] = rate;
    }
  }
  c.csa_rate = rates["compressed_sparse_attention"];
  if (j.contains("compress_ratios") && j["compress_ratios"].is_array()) {
    for (auto& r : j["compress_ratios"]) {
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > (1 << 20)) {
        return InvalidArgument("config.json: compress_ratios must hold integers in [0, 2^20]");
      }
      c.compress_ratios.push_back(static_cast<int>(r.get<int64_t>()));
    }
    // With the legacy key CSA is the rate of 4 (the only overlapping rate in the releases).
    if (!j.contains("compress_rates")) c.csa_rate = 4;
  } else if (j.contains("layer_types") && j["layer_types"].is_array()) {
    if (rates["compressed_sparse_attention"] == rates["heavily_compressed_attention"]) {
      return Unimplemented("config.json: CSA and HCA layers with the same compress rate");
    }
    for (auto& t : j["layer_types"]) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "sliding_attention") {
        c.compress_ratios.push_back(0);
      } else if (rates.count(s)) {
        c.compress_ratios.push_back(rates[s]);
      } else {
        return InvalidArgument("config.json: unknown layer type '" + s + "'");
      }
    }
  } else {
    return InvalidArgument("config.json: needs compress_ratios or layer_types");
  }
  if (static_cast<int>(c.compress_ratios.size()) < c.num_layers) {
    return InvalidArgument("config.json: the layer schedule has " +
                           std::to_string(c.compress_ratios.size()) + " entries for " +
                           std::to_string(c.num_layers) + " layers");
  }
  if (static_cast<int>(c.compress_ratios.size()) > c.num_layers) {
    c.mtp_compress_ratio = c.compress_ratios[c.num_layers];
  }
  c.compress_ratios.resize(c.num_layers);

  // Hash-routed layers: mlp_layer_types or num_hash_layers (default 3, as transformers).
  if (j.contains("mlp_layer_types") && j["mlp_layer_types"].is_array()) {
    for (auto& t : j["mlp_layer_types"]) c.hash_layers.push_back(t == "hash_moe");
    if (static_cast<int>(c.hash_layers.size()) < c.num_layers) {
      return InvalidArgument("config.json: mlp_layer_types is shorter than num_hidden_layers");
    }
    c.hash_layers.resize(c.num_layers);
  } else {
    int n_hash = 3;
    DSINFER_RETURN_IF_ERROR(ReadKey(j, {"num_hash_layers", "n_hash_layers"}, &n_hash, false));
    if (n_hash < 0) {
      return InvalidArgument("config.json: num_hash_layers = " + std::to_string(n_hash) +
                             " must be >= 0");
    }
    for (int l = 0; l < c.num_layers; ++l) c.hash_layers.push_back(l < n_hash);
  }

  // Compress-table RoPE: rope_parameters.compress (modern) or rope_scaling (legacy).
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    if (rp.contains("main") && rp["main"].is_object()) {
      DSINFER_RETURN_IF_ERROR(CheckMainRope(rp["main"]));
      DSINFER_RETURN_IF_ERROR(ReadKey(rp["main"], {"rope_theta"}, &c.rope_theta, false));
    }
    if (rp.contains("compress") && rp["compress"].is_object()) {
      DSINFER_RETURN_IF_ERROR(
          ReadKey(rp["compress"], {"rope_theta"}, &c.compress_rope_theta, false));
      DSINFER_RETURN_IF_ERROR(ReadYarn(rp["compress"], &c.compress_yarn, "DeepSeek-V4"));
    } else if (!rp.contains("main")) {
      DSINFER_RETURN_IF_ERROR(ReadYarn(rp, &c.compress_yarn, "DeepSeek-V4"));
    }
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    DSINFER_RETURN_IF_ERROR(ReadYarn(j["rope_scaling"], &c.compress_yarn, "DeepSeek-V4"));
  }

  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const json& q = j["quantization_config"];
    DSINFER_RETURN_IF_ERROR(CheckQuantization(q));
    if (q.contains("weight_block_size") && q["weight_block_size"].is_array() &&
        q["weight_block_size"].size() == 2) {
      if (q["weight_block_size"][0] != q["weight_block_size"][1]) {
        return Unimplemented("config.json: non-square FP8 weight blocks are not supported");
      }
      const json first = {{"weight_block_size", q["weight_block_size"][0]}};
      DSINFER_RETURN_IF_ERROR(ReadKey(first, {"weight_block_size"}, &c.fp8_block_size, true));
    }
  }
  DSINFER_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace

StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& name) {
  if (name == "auto") return KvCacheDtype::kAuto;
  if (name == "float32" || name == "fp32") return KvCacheDtype::kFloat32;
  if (name == "fp8") return KvCacheDtype::kFp8;
  return InvalidArgument("kv cache dtype '" + name + "': expected auto, float32 or fp8");
}

const char* KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kFloat32:
      return "float32";
    case KvCacheDtype::kFp8:
      return "fp8";
  }
  return "?";
}

KvCacheDtype ResolveV4KvCacheDtype(KvCacheDtype option) {
  return option == KvCacheDtype::kAuto ? KvCacheDtype::kFloat32 : option;
}

Status CheckV41KvCacheDtype(KvCacheDtype option) {
  if (option != KvCacheDtype::kFloat32) return Status::Ok();
  return InvalidArgument(
      "kv cache dtype float32: DeepSeek-V4.1 rounds and stores its cache in FP8 / FP4 (the "
      "reference's forward does); use auto or fp8");
}

Status DeepseekV4Config::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgument("config.json: " + what); };
  if (vocab_size <= 0 || hidden_size <= 0 || num_layers <= 0 || num_heads <= 0 || head_dim <= 0) {
    return bad("vocab_size, hidden_size, num_hidden_layers, num_attention_heads, head_dim must be > 0");
  }
  if (rope_head_dim <= 0 || rope_head_dim > head_dim || rope_head_dim % 2) {
    return bad("the RoPE dims must be even and at most head_dim");
  }
  if (index_head_dim < rope_head_dim) return bad("index_head_dim must be >= the RoPE dims");
  if (o_groups <= 0 || num_heads % o_groups) return bad("num_attention_heads % o_groups != 0");
  if (n_routed_experts <= 0 || num_experts_per_tok <= 0 || num_experts_per_tok > n_routed_experts) {
    return bad("need 0 < num_experts_per_tok <= n_routed_experts");
  }
  if (scoring_func != "sqrtsoftplus" && scoring_func != "softmax" && scoring_func != "sigmoid") {
    return bad("unknown scoring_func " + scoring_func);
  }
  if (sliding_window <= 0) return bad("sliding_window must be > 0");
  if (hc_mult <= 0 || hc_mult > 16 || hc_sinkhorn_iters <= 0) {
    return bad("need 0 < hc_mult <= 16 and hc_sinkhorn_iters > 0");
  }
  if (csa_rate <= 0) return bad("the CSA compress rate must be > 0");
  if (index_topk <= 0 || index_n_heads <= 0) return bad("index_topk and index_n_heads must be > 0");
  DSINFER_RETURN_IF_ERROR(CheckIndexHeads(index_n_heads));
  if (q_lora_rank <= 0 || o_lora_rank <= 0 || moe_intermediate_size <= 0) {
    return bad("q_lora_rank, o_lora_rank and moe_intermediate_size must be > 0");
  }
  if (n_shared_experts < 0 || n_shared_experts > 1) return bad("n_shared_experts must be 0 or 1");
  if (fp8_block_size <= 0) return bad("the FP8 weight block size must be > 0");
  if (!(rms_norm_eps > 0))
    return bad("rms_norm_eps = " + std::to_string(rms_norm_eps) + " must be > 0");
  if (!(hc_eps > 0)) return bad("hc_eps = " + std::to_string(hc_eps) + " must be > 0");
  if (num_mtp_layers < 0) {
    return bad("num_nextn_predict_layers = " + std::to_string(num_mtp_layers) + " must be >= 0");
  }
  if (bos_token_id < 0 || bos_token_id >= vocab_size) {
    return bad("bos_token_id = " + std::to_string(bos_token_id) +
               " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  if (eos_token_id < 0 || eos_token_id >= vocab_size) {
    return bad("eos_token_id = " + std::to_string(eos_token_id) +
               " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
  if (!(rope_theta > 0) || !(compress_rope_theta > 0)) return bad("rope_theta values must be > 0");
  if (!(routed_scaling_factor > 0)) return bad("routed_scaling_factor must be > 0");

  if (mtp_compress_ratio != 0) return Unimplemented("config.json: a compressed MTP layer");
  if (compress_yarn.enabled &&
      (compress_yarn.factor <= 0 || compress_yarn.original_max_position_embeddings <= 0)) {
    return bad("YaRN factor and original_max_position_embeddings must be > 0");
  }
  return Status::Ok();
}

StatusOr<DeepseekV4Config> ParseDeepseekV4Config(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("config.json is not valid JSON");
  try {
    return Parse(j);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("config.json: ") + e.what());
  }
}

StatusOr<DeepseekV4Config> LoadDeepseekV4Config(const std::string& model_dir) {
  DSINFER_ASSIGN_OR_RETURN(const std::string text, ReadConfigText(model_dir));
  auto config = ParseDeepseekV4Config(text);
  if (!config.ok()) return ConfigFileError(model_dir, config.status());
  return config;
}

std::string DeepseekV4ConfigToJson(const DeepseekV4Config& c) {
  json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = "deepseek_v4";
  WriteSharedKeys(c, &j);
  j["num_nextn_predict_layers"] = c.num_mtp_layers;
  std::vector<int> ratios = c.compress_ratios;
  if (c.num_mtp_layers > 0) ratios.push_back(c.mtp_compress_ratio);
  j["compress_ratios"] = ratios;
  int hca_rate = 0;
  for (int r : c.compress_ratios) {
    if (r != 0 && r != c.csa_rate) hca_rate = r;
  }
  j["compress_rates"] = {{"compressed_sparse_attention", c.csa_rate},
                         {"heavily_compressed_attention", hca_rate ? hca_rate : 128}};
  int n_hash = 0;
  while (n_hash < c.num_layers && c.hash_layers[n_hash]) ++n_hash;
  j["num_hash_layers"] = n_hash;
  // Modern spellings too (transformers reads layer_types / mlp_layer_types / rope_parameters first).
  std::vector<std::string> layer_types, mlp_layer_types;
  for (int l = 0; l < c.num_layers; ++l) {
    layer_types.push_back(c.compress_ratios[l] == 0 ? "sliding_attention"
                          : c.IsCsa(l)              ? "compressed_sparse_attention"
                                                    : "heavily_compressed_attention");
    mlp_layer_types.push_back(c.hash_layers[l] ? "hash_moe" : "moe");
  }
  j["layer_types"] = layer_types;
  j["mlp_layer_types"] = mlp_layer_types;
  json compress = {{"rope_type", "default"}, {"rope_theta", c.compress_rope_theta},
                   {"partial_rotary_factor", double(c.rope_head_dim) / c.head_dim}};
  if (c.compress_yarn.enabled) {
    compress["rope_type"] = "yarn";
    compress["factor"] = c.compress_yarn.factor;
    compress["original_max_position_embeddings"] = c.compress_yarn.original_max_position_embeddings;
    compress["beta_fast"] = c.compress_yarn.beta_fast;
    compress["beta_slow"] = c.compress_yarn.beta_slow;
    compress["attention_factor"] = 1.0;
  }
  j["rope_parameters"] = {{"main",
                           {{"rope_type", "default"},
                            {"rope_theta", c.rope_theta},
                            {"partial_rotary_factor", double(c.rope_head_dim) / c.head_dim}}},
                          {"compress", compress}};
  j["torch_dtype"] = "bfloat16";
  return j.dump(2) + "\n";
}

}  // namespace dsinfer::io
