#include "model/deepseek_v41/rope.h"

#include "backend/cpu/ops.h"
#include "model/deepseek_v4/rope_table.h"

namespace dsinfer::model::deepseek_v41 {

RopeTables RopeTables::Build(const io::DeepseekV41Config& c) {
  RopeTables t;
  t.main = deepseek_v4::ComputeInvFreq(c.rope_theta, c.rope_head_dim, io::YarnParams{});
  t.compress = deepseek_v4::ComputeInvFreq(c.compress_rope_theta, c.rope_head_dim, c.compress_yarn);
  return t;
}

void RopeRows(float* v, int64_t rows, int64_t per_token, int64_t dim, int rope_dim,
              const std::vector<float>& inv_freq, const int64_t* positions, bool inverse) {
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < per_token; ++h) {
      float* row = v + (t * per_token + h) * dim;
      backend::cpu::Rope(row + dim - rope_dim, rope_dim / 2, inv_freq.data(), positions[t],
                         inverse);
    }
  }
}

}  // namespace dsinfer::model::deepseek_v41
