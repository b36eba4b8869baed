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

// The same attention in the precision of the official kernel, DeepSeek-V4's with the FP8 cache
// (spec §2.5: bf16 inputs, fp32 accumulation, P cast to bf16 for P·V): q is rounded to bf16 here
// (the keys are bf16 values already: the cache rounds them), the keys go in chunks of
// softmax::kChunk (backend/softmax_fold.h) in list order, each chunk's weights e_j =
// exp(z_j - chunk max) summed in fp32 and rounded to bf16 for its P V, the chunks folded in order
// as the tensor-core kernel folds them. q: [d]; o: [d].
void AttendHeadBf16(const float* q, const std::vector<const float*>& keys, int64_t d, float scale,
                    float sink, float* o);

}  // namespace dsinfer::backend::cpu
