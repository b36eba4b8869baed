#include "io/deepseek_v41_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/config_json.h"

namespace dsinfer::io {

using json = nlohmann::json;

namespace {

template <typename T>
Status ReadList(const json& j, const char* key, std::vector<T>* out, bool* present = nullptr) {
  auto it = j.find(key);
  if (present) *present = false;
  if (it == j.end() || it->is_null()) return Status::Ok();
  const std::string where = std::string("config.json: text_config.") + key;
  if (!it->is_array()) return InvalidArgument(where + " is not a list");
  out->clear();
  for (const json& v : *it) {
    if (!v.is_number_integer()) return InvalidArgument(where + " has a non-integer entry");
    const int64_t x = v.get<int64_t>();
    if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return InvalidArgument(where + " entry " + v.dump() + " is out of range");
    }
    out->push_back(static_cast<T>(x));
  }
  if (present) *present = true;
  return Status::Ok();
}

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

StatusOr<DeepseekV41Config> ParseText(const json& t) {
  DeepseekV41Config c;
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"vocab_size"}, &c.vocab_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"hidden_size"}, &c.hidden_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"num_hidden_layers"}, &c.num_layers, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"num_attention_heads"}, &c.num_heads, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"head_dim"}, &c.head_dim, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"qk_rope_head_dim"}, &c.rope_head_dim, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"q_lora_rank"}, &c.q_lora_rank, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"o_groups"}, &c.o_groups, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"o_lora_rank"}, &c.o_lora_rank, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"n_routed_experts"}, &c.n_routed_experts, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"n_shared_experts"}, &c.n_shared_experts, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"num_experts_per_tok"}, &c.num_experts_per_tok, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"moe_intermediate_size"}, &c.moe_intermediate_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"scoring_func"}, &c.scoring_func, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"gate_temp"}, &c.gate_temp, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"norm_topk_prob"}, &c.norm_topk_prob, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"routed_scaling_factor"}, &c.routed_scaling_factor, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"swiglu_limit"}, &c.swiglu_limit, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"sliding_window"}, &c.sliding_window, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"rope_theta"}, &c.rope_theta, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"compress_rope_theta"}, &c.compress_rope_theta, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(t, {"max_position_embeddings"}, &c.max_position_embeddings, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"candidate_topk_blocks"}, &c.candidate_topk_blocks, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"candidate_block_size"}, &c.candidate_block_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"index_n_heads"}, &c.index_n_heads, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"index_head_dim"}, &c.index_head_dim, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"index_topk"}, &c.index_topk, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"hc_mult"}, &c.hc_mult, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"hc_sinkhorn_iters"}, &c.hc_sinkhorn_iters, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"hc_eps"}, &c.hc_eps, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"rms_norm_eps"}, &c.rms_norm_eps, false));
  DSINFER_RETURN_IF_ERROR(ReadList(t, "engram_layer_ids", &c.engram_layer_ids));
  DSINFER_RETURN_IF_ERROR(ReadList(t, "engram_num_embeddings", &c.engram_num_embeddings));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"engram_vocab_size"}, &c.engram_vocab_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"engram_max_ngram_size"}, &c.engram_max_ngram_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"engram_n_heads"}, &c.engram_n_heads, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"engram_head_dim"}, &c.engram_head_dim, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"engram_pad_id"}, &c.engram_pad_id, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(t, {"engram_compressed_vocab_size"}, &c.engram_compressed_vocab_size, false));
  c.num_nextn_predict_layers = 3;  // the reference default
  DSINFER_RETURN_IF_ERROR(
      ReadKey(t, {"num_nextn_predict_layers"}, &c.num_nextn_predict_layers, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"dspark_block_size"}, &c.dspark_block_size, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"dspark_noise_token_id"}, &c.dspark_noise_token_id, false));
  bool have_targets = false;
  DSINFER_RETURN_IF_ERROR(
      ReadList(t, "dspark_target_layer_ids", &c.dspark_target_layer_ids, &have_targets));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"dspark_markov_rank"}, &c.dspark_markov_rank, false));
  DSINFER_RETURN_IF_ERROR(
      ReadKey(t, {"dspark_n_routed_experts"}, &c.dspark_n_routed_experts, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"dspark_num_experts_per_tok", "dspark_n_activated_experts"},
                                  &c.dspark_num_experts_per_tok, false));
  if (!have_targets || c.dspark_target_layer_ids.empty())
    c.dspark_target_layer_ids = c.DefaultDSparkTargets();
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"bos_token_id"}, &c.bos_token_id, false));
  if (t.contains("eos_token_id") && t["eos_token_id"].is_array()) {
    if (t["eos_token_id"].empty() || !t["eos_token_id"][0].is_number_integer()) {
      return InvalidArgument("config.json: text_config.eos_token_id is an empty or bad list");
    }
    c.eos_token_id = t["eos_token_id"][0].get<int64_t>();
  } else {
    DSINFER_RETURN_IF_ERROR(ReadKey(t, {"eos_token_id"}, &c.eos_token_id, false));
  }
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"tie_word_embeddings"}, &c.tie_word_embeddings, false));

  // Keys whose other values would be another model.
  std::string act = "silu", topk_method = "noaux_tc";
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"hidden_act"}, &act, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"topk_method"}, &topk_method, false));
  if (act != "silu") return Unimplemented("config.json: hidden_act '" + act + "' is not supported");
  if (topk_method != "noaux_tc") {
    return Unimplemented("config.json: topk_method '" + topk_method + "' is not supported");
  }
  int64_t kv_heads = 1;
  bool attention_bias = false;
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"num_key_value_heads"}, &kv_heads, false));
  DSINFER_RETURN_IF_ERROR(ReadKey(t, {"attention_bias"}, &attention_bias, false));
  if (kv_heads != 1)
    return Unimplemented("config.json: num_key_value_heads must be 1 (shared K=V)");
  if (attention_bias) return Unimplemented("config.json: attention_bias = true is not supported");

  // RoPE: rope_parameters {main, compress} when given, else the flat rope_scaling (YaRN applies
  // only to the compress table), as the reference's __post_init__.
  const json* rp = t.contains("rope_parameters") && t["rope_parameters"].is_object()
                       ? &t["rope_parameters"]
                       : nullptr;
  if (rp && rp->contains("main") && rp->contains("compress") && (*rp)["main"].is_object() &&
      (*rp)["compress"].is_object()) {
    const json& main = (*rp)["main"];
    const json& comp = (*rp)["compress"];
    if (main.value("rope_type", std::string("default")) != "default") {
      return Unimplemented("config.json: rope_parameters.main must be a 'default' RoPE");
    }
    DSINFER_RETURN_IF_ERROR(ReadKey(main, {"rope_theta"}, &c.rope_theta, false));
    DSINFER_RETURN_IF_ERROR(ReadKey(comp, {"rope_theta"}, &c.compress_rope_theta, false));
    DSINFER_RETURN_IF_ERROR(ReadYarn(comp, &c.compress_yarn, "DeepSeek-V4.1"));
  } else if (t.contains("rope_scaling") && t["rope_scaling"].is_object()) {
    DSINFER_RETURN_IF_ERROR(ReadYarn(t["rope_scaling"], &c.compress_yarn, "DeepSeek-V4.1"));
  }

  // compress_ratios: the released schedule for 40 layers, else the reference's scaled pattern.
  const int n = c.num_layers;
  if (n <= 0) return InvalidArgument("config.json: text_config.num_hidden_layers must be > 0");
  bool have_ratios = false;
  DSINFER_RETURN_IF_ERROR(ReadList(t, "compress_ratios", &c.compress_ratios, &have_ratios));
  std::vector<int> released(2, 0);
  released.insert(released.end(), 18, 2);
  released.insert(released.end(), 20, 1);
  if (!have_ratios) {
    if (n == static_cast<int>(released.size())) {
      c.compress_ratios = released;
    } else {
      const int n_slide = std::min(2, n), n_enc = std::max(0, (n - n_slide + 1) / 2);
      c.compress_ratios.assign(n_slide, 0);
      c.compress_ratios.insert(c.compress_ratios.end(), n_enc, 2);
      c.compress_ratios.insert(c.compress_ratios.end(), std::max(0, n - n_slide - n_enc), 1);
    }
  }
  const int total = static_cast<int>(c.compress_ratios.size());
  if (total < n) {
    return InvalidArgument("config.json: compress_ratios needs at least num_hidden_layers (" +
                           std::to_string(n) + ") entries, got " + std::to_string(total));
  }
  if (total > n + c.num_nextn_predict_layers) {
    return InvalidArgument("config.json: compress_ratios has " + std::to_string(total) +
                           " entries but num_hidden_layers + num_nextn_predict_layers = " +
                           std::to_string(n + c.num_nextn_predict_layers));
  }
  c.dspark_compress_ratios.assign(c.compress_ratios.begin() + n, c.compress_ratios.end());
  c.compress_ratios.resize(n);
  for (int r : c.compress_ratios) {
    if (r < 0) return InvalidArgument("config.json: compress_ratios has a negative entry");
  }

  bool have_kv = false, have_index = false;
  DSINFER_RETURN_IF_ERROR(ReadList(t, "kv_source_layer_ids", &c.kv_source_layer_ids, &have_kv));
  DSINFER_RETURN_IF_ERROR(
      ReadList(t, "index_source_layer_ids", &c.index_source_layer_ids, &have_index));
  const std::vector<int> released_kv = {2, 8, 14, 20};
  if (!have_kv) {
    if (std::equal(c.compress_ratios.begin(), c.compress_ratios.end(), released.begin(),
                   released.begin() + std::min<size_t>(n, released.size())) &&
        n <= static_cast<int>(released.size())) {
      c.kv_source_layer_ids = released_kv;
    } else {
      for (int i = 0; i < n; ++i) {
        const int r = c.compress_ratios[i];
        if (r > 0 && (i == 0 || c.compress_ratios[i - 1] != r)) c.kv_source_layer_ids.push_back(i);
      }
    }
  }
  if (!have_index) {
    c.index_source_layer_ids = c.kv_source_layer_ids == released_kv
                                   ? std::vector<int>{2, 8, 14, 20, 24, 28, 32, 36}
                                   : c.kv_source_layer_ids;
  }
  c.candidate_source_layer_id = c.kv_source_layer_ids.empty() ? -1 : c.kv_source_layer_ids.back();
  DSINFER_RETURN_IF_ERROR(
      ReadKey(t, {"candidate_source_layer_id"}, &c.candidate_source_layer_id, false));
  return c;
}

}  // namespace

bool DeepseekV41Config::IsKvSource(int layer) const { return Contains(kv_source_layer_ids, layer); }
bool DeepseekV41Config::IsIndexSource(int layer) const {
  return Contains(index_source_layer_ids, layer);
}
int DeepseekV41Config::KvSourceOf(int layer) const {
  int best = -1;
  for (int s : kv_source_layer_ids) {
    if (s <= layer) best = std::max(best, s);
  }
  return best;
}

Status DeepseekV41Config::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgument("config.json: " + what); };
  if (vocab_size <= 0 || hidden_size <= 0 || num_heads <= 0 || head_dim <= 0) {
    return bad("vocab_size, hidden_size, num_attention_heads and head_dim must be > 0");
  }
  if (rope_head_dim <= 0 || rope_head_dim % 2 != 0 || rope_head_dim > head_dim ||
      rope_head_dim > index_head_dim) {
    return bad("qk_rope_head_dim must be even, > 0 and at most head_dim and index_head_dim");
  }
  if (q_lora_rank <= 0 || o_groups <= 0 || o_lora_rank <= 0 || num_heads % o_groups != 0) {
    return bad("q_lora_rank, o_groups, o_lora_rank must be > 0 and o_groups must divide the heads");
  }
  if (n_routed_experts <= 0 || num_experts_per_tok <= 0 || num_experts_per_tok > n_routed_experts ||
      moe_intermediate_size <= 0) {
    return bad("bad MoE sizes (experts, experts per token, moe_intermediate_size)");
  }
  if (scoring_func != "sqrtsoftplus" && scoring_func != "sigmoid" && scoring_func != "softmax") {
    return Unimplemented("config.json: scoring_func '" + scoring_func + "' is not supported");
  }
  if (gate_temp != 1.0) {
    return Unimplemented("config.json: gate_temp != 1 is not supported (the release uses 1)");
  }
  if (sliding_window <= 0) return bad("sliding_window must be > 0");
  if (hc_mult <= 0 || hc_mult > 16 || hc_sinkhorn_iters <= 0) {
    return bad("hc_mult must be in [1, 16] and hc_sinkhorn_iters > 0");
  }
  if (index_n_heads <= 0 || index_head_dim <= 0 || index_topk <= 0) {
    return bad("index_n_heads, index_head_dim and index_topk must be > 0");
  }
  DSINFER_RETURN_IF_ERROR(CheckIndexHeads(index_n_heads));
  if (candidate_source_layer_id >= 0 && (candidate_topk_blocks <= 0 || candidate_block_size <= 0)) {
    return bad("candidate_topk_blocks and candidate_block_size must be > 0");
  }
  if (engram_layer_ids.size() != engram_num_embeddings.size() && !engram_num_embeddings.empty()) {
    return bad("engram_num_embeddings must have one entry per engram_layer_ids entry");
  }
  const int n = num_layers;
  if (static_cast<int>(compress_ratios.size()) != n) {
    return bad("compress_ratios must have num_hidden_layers entries");
  }
  // The reference's schedule checks (DeepseekV41TextConfig.__post_init__).
  for (int s : kv_source_layer_ids) {
    if (s < 0 || s >= n)
      return bad("kv_source_layer_ids entry " + std::to_string(s) + " is out of range");
    if (compress_ratios[s] == 0) {
      return bad("kv_source_layer_ids entry " + std::to_string(s) + " has compress_ratios 0");
    }
  }
  for (int s : index_source_layer_ids) {
    if (s < 0 || s >= n || compress_ratios[s] == 0) {
      return bad("index_source_layer_ids entry " + std::to_string(s) +
                 " is out of range or has compress_ratios 0");
    }
    if (KvSourceOf(s) < 0) {
      return bad("index_source_layer_ids entry " + std::to_string(s) +
                 " has no kv_source_layer_ids entry at or before it");
    }
  }
  if (candidate_source_layer_id >= 0 && !IsIndexSource(candidate_source_layer_id)) {
    return bad("candidate_source_layer_id " + std::to_string(candidate_source_layer_id) +
               " must be in index_source_layer_ids");
  }
  for (int l = 0; l < n; ++l) {
    if (compress_ratios[l] > 0 && KvSourceOf(l) < 0) {
      return bad("layer " + std::to_string(l) +
                 " has compress_ratios > 0 but no kv_source_layer_ids entry at or before it");
    }
  }
  // Schedules the reference accepts but cannot run consistently (its per-forward shared state
  // would pair one group's top-k or candidate mask with another group's entries): refused.
  for (int s : kv_source_layer_ids) {
    if (!IsIndexSource(s)) {
      return Unimplemented("config.json: kv source layer " + std::to_string(s) +
                           " is not an index source (its group would reuse another group's top-k)");
    }
    if (candidate_source_layer_id >= 0 && s > candidate_source_layer_id) {
      return Unimplemented("config.json: kv source layer " + std::to_string(s) +
                           " comes after candidate_source_layer_id (the candidate mask would "
                           "belong to another group's entries)");
    }
  }
  for (int l = 0; l < n; ++l) {
    if (compress_ratios[l] > 0 && compress_ratios[l] != compress_ratios[KvSourceOf(l)]) {
      return Unimplemented("config.json: layer " + std::to_string(l) +
                           " has a different compress ratio from its kv source layer " +
                           std::to_string(KvSourceOf(l)));
    }
  }
  for (int e : engram_layer_ids) {
    if (e < 0 || e >= n)
      return bad("engram_layer_ids entry " + std::to_string(e) + " is out of range");
  }
  if (!engram_layer_ids.empty()) {
    // Bounds far above the release (4-grams, 8 heads, 256 channels, 16M buckets) that keep the
    // hash layout's prime search and the per-row lookups small.
    if (engram_max_ngram_size < 2 || engram_max_ngram_size > 16) {
      return bad("engram_max_ngram_size must be in [2, 16]");
    }
    if (engram_n_heads < 1 || engram_n_heads > 256)
      return bad("engram_n_heads must be in [1, 256]");
    if (engram_head_dim < 1 || engram_head_dim > 65536) {
      return bad("engram_head_dim must be in [1, 65536]");
    }
    if (engram_vocab_size < 1 || engram_vocab_size > (int64_t{1} << 40)) {
      return bad("engram_vocab_size must be in [1, 2^40]");
    }
    if (engram_compressed_vocab_size < 1 || engram_compressed_vocab_size > (int64_t{1} << 31)) {
      return bad("engram_compressed_vocab_size must be in [1, 2^31]");
    }
  }
  if (num_nextn_predict_layers < 0 || num_nextn_predict_layers > 16) {
    return bad("num_nextn_predict_layers must be in [0, 16]");
  }
  return Status::Ok();
}

std::vector<int> DeepseekV41Config::DefaultDSparkTargets() const {
  std::vector<int> taps;
  for (int l = std::max(0, num_layers - 3); l < num_layers; ++l) taps.push_back(l);
  return taps;
}

Status DeepseekV41Config::ValidateDSpark() const {
  auto bad = [](const std::string& what) { return InvalidArgument("config.json: " + what); };
  if (!has_dspark()) {
    return InvalidArgument("the model has no DSpark draft layers (num_nextn_predict_layers is 0)");
  }
  if (dspark_block_size < 1 || dspark_block_size > 16)
    return bad("dspark_block_size must be in [1, 16]");
  if (dspark_noise_token_id < 0 || dspark_noise_token_id >= vocab_size)
    return bad("dspark_noise_token_id must be a token id of the vocabulary");
  // The draft's input projection reads one hidden row per tap: no taps is no input (an empty
  // list from a config file takes the default taps when parsed; this catches a config built in
  // code).
  if (dspark_target_layer_ids.empty())
    return bad("dspark_target_layer_ids must name at least one backbone layer");
  for (size_t i = 0; i < dspark_target_layer_ids.size(); ++i) {
    const int l = dspark_target_layer_ids[i];
    if (l < 0 || l >= num_layers || (i > 0 && l <= dspark_target_layer_ids[i - 1])) {
      return bad("dspark_target_layer_ids must be increasing backbone layers, not " +
                 std::to_string(l));
    }
  }
  if (dspark_markov_rank < 0) return bad("dspark_markov_rank must be >= 0");
  if (dspark_n_routed_experts <= 0 || dspark_num_experts_per_tok <= 0 ||
      dspark_num_experts_per_tok > dspark_n_routed_experts) {
    return bad("bad DSpark MoE sizes (dspark_n_routed_experts, dspark_num_experts_per_tok)");
  }
  for (size_t s = 0; s < dspark_compress_ratios.size(); ++s) {
    if (dspark_compress_ratios[s] != 0) {
      return Unimplemented(
          "config.json: compress_ratios gives DSpark draft layer " + std::to_string(s) + " ratio " +
          std::to_string(dspark_compress_ratios[s]) + " (draft layers are sliding-window only: 0)");
    }
  }
  return Status::Ok();
}

bool IsDeepseekV41ConfigJson(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const std::string type = j.value("model_type", std::string());
  return type == "deepseek_v41" || type == "deepseek_v41_text";
}

StatusOr<DeepseekV41Config> ParseDeepseekV41Config(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("config.json: not a JSON object");
  const std::string type = j.value("model_type", std::string());
  const json* text = &j;
  if (type == "deepseek_v41") {
    if (!j.contains("text_config") || !j["text_config"].is_object()) {
      return InvalidArgument("config.json: a deepseek_v41 config needs a text_config object");
    }
    text = &j["text_config"];
    const std::string text_type = text->value("model_type", std::string("deepseek_v41_text"));
    if (text_type != "deepseek_v41_text") {
      return InvalidArgument("config.json: text_config.model_type is '" + text_type +
                             "', expected 'deepseek_v41_text'");
    }
  } else if (type != "deepseek_v41_text") {
    return InvalidArgument("config.json: model_type '" + type +
                           "' is not DeepSeek-V4.1 (deepseek_v41 or deepseek_v41_text)");
  }
  DSINFER_ASSIGN_OR_RETURN(DeepseekV41Config c, ParseText(*text));
  c.has_vision = j.contains("vision_config") && !j["vision_config"].is_null();
  if (j.contains("image_token_id") && j["image_token_id"].is_number_integer()) {
    c.image_token_id = j["image_token_id"].get<int64_t>();
  } else if (c.has_vision) {
    c.image_token_id = 129264;  // the reference default
  }
  // The dense FP8 block size (the release: 32 x 32 ue8m0 blocks).
  const json* q = nullptr;
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    q = &j["quantization_config"];
  } else if (text->contains("quantization_config") && (*text)["quantization_config"].is_object()) {
    q = &(*text)["quantization_config"];
  }
  if (q && q->contains("weight_block_size") && (*q)["weight_block_size"].is_array()) {
    const json& b = (*q)["weight_block_size"];
    if (b.size() != 2 || !b[0].is_number_integer() || b[0] != b[1] || b[0].get<int>() <= 0) {
      return Unimplemented("config.json: quantization_config.weight_block_size " + b.dump() +
                           " is not supported (square blocks only)");
    }
    c.fp8_block_size = b[0].get<int>();
  }
  DSINFER_RETURN_IF_ERROR(c.Validate());
  return c;
}

StatusOr<DeepseekV41Config> LoadDeepseekV41Config(const std::string& model_dir) {
  DSINFER_ASSIGN_OR_RETURN(const std::string text, ReadConfigText(model_dir));
  auto config = ParseDeepseekV41Config(text);
  if (!config.ok()) return ConfigFileError(model_dir, config.status());
  return config;
}

std::string DeepseekV41ConfigToJson(const DeepseekV41Config& c) {
  json t;
  t["model_type"] = "deepseek_v41_text";
  WriteSharedKeys(c, &t);
  t["gate_temp"] = c.gate_temp;
  t["topk_method"] = "noaux_tc";
  t["compress_ratios"] = c.compress_ratios;
  t["kv_source_layer_ids"] = c.kv_source_layer_ids;
  t["index_source_layer_ids"] = c.index_source_layer_ids;
  t["candidate_source_layer_id"] = c.candidate_source_layer_id;
  t["candidate_topk_blocks"] = c.candidate_topk_blocks;
  t["candidate_block_size"] = c.candidate_block_size;
  t["engram_layer_ids"] = c.engram_layer_ids;
  t["engram_num_embeddings"] = c.engram_num_embeddings;
  t["engram_vocab_size"] = c.engram_vocab_size;
  t["engram_max_ngram_size"] = c.engram_max_ngram_size;
  t["engram_n_heads"] = c.engram_n_heads;
  t["engram_head_dim"] = c.engram_head_dim;
  t["engram_pad_id"] = c.engram_pad_id;
  t["engram_compressed_vocab_size"] = c.engram_compressed_vocab_size;
  t["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  t["dspark_block_size"] = c.dspark_block_size;
  t["dspark_noise_token_id"] = c.dspark_noise_token_id;
  t["dspark_target_layer_ids"] = c.dspark_target_layer_ids;
  t["dspark_markov_rank"] = c.dspark_markov_rank;
  t["dspark_n_routed_experts"] = c.dspark_n_routed_experts;
  t["dspark_num_experts_per_tok"] = c.dspark_num_experts_per_tok;
  json j;
  j["model_type"] = "deepseek_v41";
  j["architectures"] = {"DeepseekV41ForCausalLM"};
  j["text_config"] = t;
  if (c.has_vision) j["vision_config"] = json::object();  // the tower's fields are not kept
  if (c.image_token_id >= 0) j["image_token_id"] = c.image_token_id;
  return j.dump(2) + "\n";
}

}  // namespace dsinfer::io
