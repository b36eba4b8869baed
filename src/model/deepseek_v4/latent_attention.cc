#include "model/deepseek_v4/latent_attention.h"

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

LatentInputs ProjectLatentInputs(const LatentAttentionWeights& w, const LatentDims& m,
                                 const float* x, int64_t n, ThreadPool* pool) {
  LatentInputs in;
  in.cq.resize(static_cast<size_t>(n * m.q_lora_rank));
  cpu::Linear(x, n, m.D, w.wq_a.view(), m.q_lora_rank, in.cq.data(), pool);
  cpu::RmsNorm(in.cq.data(), n, m.q_lora_rank, w.q_norm.data(), m.eps);
  in.q.resize(static_cast<size_t>(n * m.H * m.d));
  cpu::Linear(in.cq.data(), n, m.q_lora_rank, w.wq_b.view(), m.H * m.d, in.q.data(), pool);
  in.kv.resize(static_cast<size_t>(n * m.d));
  cpu::Linear(x, n, m.D, w.wkv.view(), m.d, in.kv.data(), pool);
  cpu::RmsNorm(in.kv.data(), n, m.d, w.kv_norm.data(), m.eps);
  return in;
}

void ProjectLatentOutput(const LatentAttentionWeights& w, const LatentDims& m,
                         const std::vector<float>& inv_freq, const int64_t* positions, float* o,
                         int64_t n, float* out, ThreadPool* pool) {
  cpu::RopeRows(o, n, m.H, m.d, m.rope_dim, inv_freq, positions, true);
  const int64_t G = m.o_groups, olr = m.o_lora_rank, group_in = m.H * m.d / G;
  std::vector<float> z(static_cast<size_t>(n * G * olr));  // [N, G * o_lora_rank]
  for (int64_t g = 0; g < G; ++g) {
    cpu::Gemm(o + g * group_in, n, group_in, m.H * m.d, w.wo_a.view().Offset(g * olr, group_in),
              olr, z.data() + g * olr, G * olr, pool);
  }
  cpu::Linear(z.data(), n, G * olr, w.wo_b.view(), m.D, out, pool);
}

}  // namespace dsinfer::model::deepseek_v4
