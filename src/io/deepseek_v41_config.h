// DeepseekV41Config: the hyper-parameters of DeepSeek-V4.1 (model_type "deepseek_v41"), read from a
// model dir's config.json. The release's config is composite: the text model lives under
// `text_config` (model_type "deepseek_v41_text"), next to a `vision_config` and `image_token_id`; a
// flat text config is accepted too. Defaults and derived fields follow the reference configuration
// (transformers `configuration_deepseek_v41.py`, `DeepseekV41TextConfig.__post_init__`): missing
// `compress_ratios`, `kv_source_layer_ids`, `index_source_layer_ids` and
// `candidate_source_layer_id` are filled in exactly as it does. Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace dsinfer::io {

struct DeepseekV41Config {
  int64_t vocab_size = 129280;
  int64_t hidden_size = 5120;  // D
  int num_layers = 40;         // backbone layers (the DSpark draft layers not included)
  int num_heads = 64;          // H
  int head_dim = 512;          // d (K = V, one shared latent)
  int rope_head_dim = 64;      // RoPE on the trailing d_r channels (interleaved pairs)
  int q_lora_rank = 1280;
  int o_groups = 8;
  int o_lora_rank = 1024;
  int n_routed_experts = 384;
  int n_shared_experts = 1;
  int num_experts_per_tok = 6;
  int moe_intermediate_size = 2304;
  std::string scoring_func = "sqrtsoftplus";
  double gate_temp = 1.0;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.5;
  double swiglu_limit = 10.0;  // <= 0: no clamp
  int sliding_window = 128;
  double rope_theta = 10000.0;  // "main" table (ratio-0 layers)
  double compress_rope_theta = 160000.0;
  YarnParams compress_yarn;  // YaRN of the "compress" table (layers with ratio > 0)
  int64_t max_position_embeddings = 1048576;

  // CSA2 schedule. compress_ratios[l]: 0 = sliding window only, 1 = full-resolution shared KV
  // (the CED decoder), r > 1 = r tokens pooled per compressed entry (the CED encoder).
  std::vector<int> compress_ratios;  // [num_layers] (draft-layer entries dropped)
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  int candidate_source_layer_id = -1;  // < 0: no two-level top-k
  int candidate_topk_blocks = 2048;
  int candidate_block_size = 8;
  int index_n_heads = 32;
  int index_head_dim = 128;
  int index_topk = 512;

  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-20;

  // Engram n-gram memory (model/deepseek_v41/engram.h): the layers that add an n-gram lookup to
  // their input streams, each one's table rows, the hash's bucket base, n-gram size and heads.
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int64_t engram_vocab_size = 16000000;
  int engram_max_ngram_size = 4;
  int engram_n_heads = 8;
  int engram_head_dim = 256;
  int64_t engram_pad_id = 2;
  int64_t engram_compressed_vocab_size = 99092;

  // The DSpark drafter (model/deepseek_v41/dspark.h): num_nextn_predict_layers draft stages
  // (`mtp.{s}.*`, window-only V4.1 blocks with their own MoE sizes) that draft a block of
  // dspark_block_size tokens at once from the inputs of the dspark_target_layer_ids layers; block
  // slots after the first hold dspark_noise_token_id; a rank-dspark_markov_rank bigram head and a
  // confidence head follow.
  int num_nextn_predict_layers = 0;
  int dspark_block_size = 5;
  int64_t dspark_noise_token_id = 128799;
  std::vector<int> dspark_target_layer_ids;  // default: the last three backbone layers
  int dspark_markov_rank = 256;
  int dspark_n_routed_experts = 128;
  int dspark_num_experts_per_tok = 3;
  std::vector<int> dspark_compress_ratios;  // compress_ratios' draft-layer entries (must be 0)
  bool has_vision = false;                  // a vision_config is present (the tower is not built)
  int64_t image_token_id = -1;              // >= 0 when the config names one
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int fp8_block_size = 128;  // quantization_config.weight_block_size
  bool tie_word_embeddings = false;

  bool has_dspark() const { return num_nextn_predict_layers > 0; }
  // The default taps: the last three backbone layers (the release's 37, 38, 39 of 40).
  std::vector<int> DefaultDSparkTargets() const;
  bool IsKvSource(int layer) const;
  bool IsIndexSource(int layer) const;
  // The KV source whose compressed entries `layer` reads (the last one at or before it), or -1.
  int KvSourceOf(int layer) const;

  // Checks the reference's constraints plus the ones this engine needs; InvalidArgument /
  // Unimplemented naming the field otherwise. The DSpark fields are checked apart, when the
  // drafter is loaded (ValidateDSpark), so that a config's unused draft keys never refuse a model.
  Status Validate() const;
  Status ValidateDSpark() const;
};

// Parses config.json text (composite with `text_config`, or a flat text config).
StatusOr<DeepseekV41Config> ParseDeepseekV41Config(const std::string& json_text);
// Reads <dir>/config.json.
StatusOr<DeepseekV41Config> LoadDeepseekV41Config(const std::string& model_dir);
// True when config.json text names a V4.1 model (model_type deepseek_v41 / deepseek_v41_text).
bool IsDeepseekV41ConfigJson(const std::string& json_text);
// The composite form (model_type deepseek_v41, text_config with every field spelled out).
std::string DeepseekV41ConfigToJson(const DeepseekV41Config& config);

}  // namespace dsinfer::io
