#include "model/deepseek_v41/rope.h"

#include "model/deepseek_v4/rope_table.h"

namespace dsinfer::model::deepseek_v41 {

RopeTables RopeTables::Build(const io::DeepseekV41Config& c) {
  RopeTables t;
  t.main = deepseek_v4::ComputeInvFreq(c.rope_theta, c.rope_head_dim, io::YarnParams{});
  t.compress = deepseek_v4::ComputeInvFreq(c.compress_rope_theta, c.rope_head_dim, c.compress_yarn);
  return t;
}

}  // namespace dsinfer::model::deepseek_v41
