// DeepSeek-V4.1 text-model weights held as fp32/bf16 on the host (the CPU backend's working
// format), loaded by the names of weight_schema.h and dequantized from BF16 / FP8 / FP4 with the V4
// readers (same storage formats; the release's dense FP8 blocks are 32 x 32). Member names follow
// the checkpoint keys. Immutable after loading; safe to share across threads.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "io/deepseek_v41_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/weights.h"
#include "model/deepseek_v41/engram.h"

namespace dsinfer::model::deepseek_v41 {

using deepseek_v4::ExpertWeights;
using deepseek_v4::HyperConnectionWeights;
using deepseek_v4::Matrix;
using deepseek_v4::MoeWeights;

// A KV source's compressor (CSA2: no overlap, no position bias).
struct CompressorWeights {
  int ratio = 0;            // 1: per-token projection; r > 1: r tokens pooled by a softmax gate
  Matrix wkv;               // [d, D]
  Matrix wgate;             // [d, D] (ratio > 1 only)
  std::vector<float> norm;  // [d]
};

// An index source's indexer. Only KV sources own the key projection (`wk`, `k_norm`); the other
// index sources ("Reindex") score against the keys their group's source published.
struct IndexerWeights {
  Matrix wq_b;          // [index_n_heads * index_head_dim, q_lora_rank]
  Matrix weights_proj;  // [index_n_heads, D]
  bool owns_k = false;
  Matrix wk;                  // [index_head_dim, d]
  std::vector<float> k_norm;  // [index_head_dim]
};

struct AttentionWeights : deepseek_v4::LatentAttentionWeights {
  int compress_ratio = 0;                         // 0: window only
  std::unique_ptr<CompressorWeights> compressor;  // KV sources
  std::unique_ptr<IndexerWeights> indexer;        // index sources
};

struct BlockWeights : deepseek_v4::BlockSites {
  AttentionWeights attn;
  MoeWeights ffn;                         // gate, bias (text tokens), experts, shared expert
  std::vector<float> gate_bias_vl;        // [E] the router bias of image tokens (vision not built)
  std::unique_ptr<EngramWeights> engram;  // Engram layers (its table in the checkpoint's mapping)
};

// A DSpark draft stage: a window-only V4.1 block (its MoE with the dspark_* expert counts).
struct DSparkStageWeights : deepseek_v4::BlockSites {
  deepseek_v4::LatentAttentionWeights attn;
  MoeWeights ffn;  // gate, bias, experts, shared expert
};

// The DSpark drafter's own weights (`mtp.*`); it shares the trunk's embed and head.
struct DSparkWeights {
  Matrix main_proj;              // [D, taps * D]
  std::vector<float> main_norm;  // [D]
  std::vector<DSparkStageWeights> stages;
  std::vector<float> norm;        // [D] before the head
  Matrix markov_embed;            // [V, r] (r = dspark_markov_rank; empty when 0)
  Matrix markov_head;             // [V, r]
  std::vector<float> confidence;  // [D + r]

  // Loads DSparkWeightSchema(config): a missing tensor (a checkpoint without draft layers), wrong
  // shape or bad dtype is an error naming it.
  static StatusOr<std::unique_ptr<DSparkWeights>> Load(const io::Checkpoint& ckpt,
                                                       const io::DeepseekV41Config& config);
};

struct ModelWeights {
  Matrix embed;             // [V, D]
  Matrix head;              // [V, D] (the embedding when tied)
  std::vector<float> norm;  // [D]
  std::vector<BlockWeights> layers;

  // Loads every tensor the config calls for; a missing tensor, wrong shape or bad dtype is an
  // error naming it. The Engram tables stay in `ckpt`'s mapping: it must outlive the weights.
  static StatusOr<std::unique_ptr<ModelWeights>> Load(const io::Checkpoint& ckpt,
                                                      const io::DeepseekV41Config& config);
};

}  // namespace dsinfer::model::deepseek_v41
