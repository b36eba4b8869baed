// Attention of one query head over a list of keys with a sink logit (DeepSeek-V4 and V4.1: shared
// K = V latent rows, the sink a per-head learned logit that takes probability mass but adds no
// value):  o = Σ_j softmax([q·k_j · scale, sink])_j · k_j. The reduction order is fixed (keys in
// list order), so the result does not depend on the batch. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::backend::cpu {

// q: [d]; keys: pointers to [d] rows; logits: scratch of keys.size() floats; o: [d].
void AttendHead(const float* q, const std::vector<const float*>& keys, int64_t d, float scale,
                float sink, float* logits, float* o);

}  // namespace dsinfer::backend::cpu
