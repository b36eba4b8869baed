// The V4 attention sublayer (spec §2.5–§2.9): q LoRA path with per-head RMS norm, one shared K=V
// head, partial interleaved RoPE, window + compressed (CSA top-k / HCA all) entries, per-head sink,
// inverse RoPE on the output and the grouped output projection. Updates the per-request state.
#pragma once

#include "base/thread_pool.h"
#include "io/model_config.h"
#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/rope_table.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

// x: [N, D] (attn_norm output) -> out: [N, D]. `layer` addresses the state layer (num_layers = MTP).
void AttentionForward(const AttentionWeights& w, const io::DeepseekV4Config& c,
                      const RopeTables& rope, int layer, const TokenBatch& batch, const float* x,
                      float* out, ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v4
