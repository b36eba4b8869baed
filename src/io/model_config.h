// DeepseekV4Config: the model hyper-parameters read from a model dir's config.json.
// Accepts both spellings (spec §1.1): the modern transformers keys (hidden_size, layer_types,
// compress_rates, rope_parameters, mlp_layer_types, ...) and the legacy official keys (dim,
// compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling, ...). Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsinfer::io {

// How a DeepSeek-V4 model's attention state is computed and stored: a load option (LoadOptions /
// CudaModelOptions::kv_cache_dtype, the CLI's --kv-cache-dtype), not a config.json key.
enum class KvCacheDtype {
  kAuto,     // as an option: kFloat32 for DeepSeek-V4 (the config never holds kAuto)
  kFloat32,  // fp32 rows as computed: transformers' forward, which leaves out the QAT rounding
  // The official forward's cache (spec §2.12, §3.1): K=V rows (window and compressed) with their
  // nope dims fp8_sim'd in blocks of 64 and their RoPE dims rounded to bf16, stored as
  // `fp8_ds_mla` (584 bytes at head_dim 512); the indexer's queries and keys rotated by the
  // Hadamard matrix and fp4_sim'd in blocks of 32, keys stored as e2m1 + ue8m0 (68 bytes at 128).
  kFp8,
};
// "auto", "float32" / "fp32", "fp8"; InvalidArgument naming the choices otherwise.
StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& name);
const char* KvCacheDtypeName(KvCacheDtype dtype);
// DeepSeek-V4's dtype for an option (kAuto: kFloat32).
KvCacheDtype ResolveV4KvCacheDtype(KvCacheDtype option);
// DeepSeek-V4.1 always rounds and stores its cache in FP8 / FP4: InvalidArgument for kFloat32.
Status CheckV41KvCacheDtype(KvCacheDtype option);

// YaRN parameters of the "compress" RoPE table (applied only to CSA/HCA layers).
struct YarnParams {
  bool enabled = false;
  double factor = 1.0;
  double original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
};

// The most index heads either family's config may name: the indexer's score tree
// (backend/indexer_head_sum.h's kMaxHeads; the model checks they agree).
inline constexpr int kMaxIndexHeads = 64;

struct DeepseekV4Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;          // D
  int num_layers = 0;               // main layers (MTP not included)
  int num_heads = 0;                // H
  int head_dim = 0;                 // d (K = V)
  int rope_head_dim = 0;            // d_r: RoPE on the trailing d_r dims
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  std::string scoring_func = "sqrtsoftplus";
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;        // <= 0: no clamp
  int sliding_window = 0;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  YarnParams compress_yarn;
  int64_t max_position_embeddings = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int num_mtp_layers = 0;
  // Per main layer: 0 = window only, otherwise the compression rate; a layer whose rate equals
  // csa_rate is CSA (overlapping windows + indexer), any other non-zero rate is HCA.
  std::vector<int> compress_ratios;
  int csa_rate = 4;
  int mtp_compress_ratio = 0;       // the MTP layer's schedule entry (0 in every release)
  std::vector<bool> hash_layers;    // per main layer: routed through tid2eid
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int fp8_block_size = 128;         // quantization_config.weight_block_size
  bool tie_word_embeddings = false;  // the head reads the embedding matrix (no head tensor)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kFloat32;  // set at load (see above), never kAuto
  // The FP8-instruction numerics mode (backend/wgmma_fp8.h): the FP8 / FP4 linears multiply the
  // weights' codes as Hopper's FP8 MMA does. Set at load (ModelOptions::fp8_mma), not a
  // config.json key.
  bool fp8_mma = false;

  bool IsCsa(int layer) const { return compress_ratios[layer] == csa_rate; }
  bool IsHca(int layer) const { return compress_ratios[layer] != 0 && !IsCsa(layer); }
  int nope_head_dim() const { return head_dim - rope_head_dim; }

  // Checks internal consistency (divisibility, ranges); InvalidArgument naming the field otherwise.
  Status Validate() const;
};

// Parses config.json text.
StatusOr<DeepseekV4Config> ParseDeepseekV4Config(const std::string& json_text);
// Reads <dir>/config.json.
StatusOr<DeepseekV4Config> LoadDeepseekV4Config(const std::string& model_dir);
// Writes both key spellings, so that our own model dirs load in transformers and in the official code.
std::string DeepseekV4ConfigToJson(const DeepseekV4Config& config);

}  // namespace dsinfer::io
