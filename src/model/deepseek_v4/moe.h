// Mixture of experts (spec §2.10): router (sqrtsoftplus scores; top-k with a selection-only bias, or
// hash routing through tid2eid), routed SwiGLU experts with the swiglu_limit clamp, routed scaling,
// and the shared expert. Each token sums its experts in ascending expert id, so its output does not
// depend on the other tokens in the batch.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "io/model_config.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

// x: [N, D] (ffn_norm output), ids: [N] token ids (hash routing) -> out: [N, D].
void MoeForward(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                const int32_t* ids, int64_t n, float* out, ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v4
