// The parts of the latent shared-K=V attention that every DeepSeek-V4-family layer computes the
// same way (V4 and V4.1 differ in what lies between: V4's per-head query norm, the compressed
// branches, V4.1's fake-quantized cache rows): the input projections and the output path.
// Pure functions of their inputs; `pool` runs the GEMMs.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

struct LatentDims {
  int64_t D = 0, H = 0, d = 0, q_lora_rank = 0, o_groups = 0, o_lora_rank = 0;
  int rope_dim = 0;
  float eps = 0.0f;  // rms_norm_eps
  // Either family's config (the same field names).
  template <typename Config>
  static LatentDims Of(const Config& c) {
    return {c.hidden_size, c.num_heads,   c.head_dim,      c.q_lora_rank,
            c.o_groups,    c.o_lora_rank, c.rope_head_dim, static_cast<float>(c.rms_norm_eps)};
  }
};

struct LatentInputs {
  std::vector<float> cq;  // [N, q_lora_rank] q_norm(x·wq_aᵀ)
  std::vector<float> q;   // [N, H, d] cq·wq_bᵀ (no RoPE yet)
  std::vector<float> kv;  // [N, d] kv_norm(x·wkvᵀ) (no RoPE yet)
};

// x: [N, D] (the attn_norm output).
LatentInputs ProjectLatentInputs(const LatentAttentionWeights& w, const LatentDims& dims,
                                 const float* x, int64_t n, ThreadPool* pool);

// out [N, D] = wo_b(wo_a per group(RoPE⁻¹(o) at each row's position)); o [N, H, d] is
// de-rotated in place.
void ProjectLatentOutput(const LatentAttentionWeights& w, const LatentDims& dims,
                         const std::vector<float>& inv_freq, const int64_t* positions, float* o,
                         int64_t n, float* out, ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v4
