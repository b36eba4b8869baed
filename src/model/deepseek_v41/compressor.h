// The CSA2 compressor of a KV-source layer (reference `DeepseekV41Compressor` + the entry
// publication of `DeepseekV41Attention` / `DeepseekV41Indexer`). Ratio 1: every token is its own
// entry, latent = norm(x·wkvᵀ). Ratio r > 1: groups of r consecutive tokens (no overlap, no
// position bias) pooled per channel with a softmax over the group of x·wgateᵀ, then norm. Entry g
// stands for tokens [r·g, r·g + r) and is emitted when its last token is processed. From the
// pre-RoPE latent of entry g (position r·g, compress table):
//   index key  = fp4_sim_ue8m0_32( RoPE( k_norm(latent·wkᵀ) ) )        [index_head_dim]
//   KV entry   = fp4_sim_e4m3_16( RoPE( latent ) )                      [head_dim]
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/rope.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/weights.h"

namespace dsinfer::model::deepseek_v41 {

// Feeds the projections of `count` tokens at positions start_pos ... (kv: [count, d] = x·wkvᵀ;
// gate: [count, d] = x·wgateᵀ, null at ratio 1) into the source layer's state and appends every
// entry they complete (FP4-packed, state_layout.h).
void CompressTokens(const CompressorWeights& comp, const IndexerWeights& indexer,
                    const io::DeepseekV41Config& c, const RopeTables& rope, const float* kv,
                    const float* gate, int64_t start_pos, int64_t count, LayerState* st,
                    ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v41
