// DeepSeek-V4.1 attention (reference `DeepseekV41Attention`): latent shared-K=V attention over a
// sliding window of raw K=V plus, for layers with a compressed branch (ratio > 0), the top-k
// entries of the shared compressed KV of the layer's group (CSA2 KV sharing):
//   q   = RoPE( wq_b(cq) ),  cq = q_norm(wq_a(x))                  (no per-head norm, unlike V4)
//   kv  = fp8_sim_32( RoPE( kv_norm(wkv(x)) ) )                     (the whole vector, RoPE
//   included) KV sources run their compressor (compressor.h); index sources score the group's index
//   keys (indexer.h) and publish per-token top-k picks, which the following layers of the group
//   reuse; keys of query t = window [t-W+1, t] ∪ {entry w : w in the current top-k of t} o   =
//   softmax with a per-head sink over those keys; RoPE⁻¹ at the query position; grouped wo_a; wo_b.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/batch.h"
#include "model/deepseek_v41/rope.h"
#include "model/deepseek_v41/weights.h"

namespace dsinfer::model::deepseek_v41 {

// x: [N, D] (attn_norm output) -> out: [N, D]. Advances the layer's state of every segment and
// the segments' GroupShared.
void AttentionForward(const AttentionWeights& w, const io::DeepseekV41Config& c,
                      const RopeTables& rope, int layer, TokenBatch& batch, const float* x,
                      float* out, ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v41
