// Mixture of experts (spec §2.10): router (sqrtsoftplus scores; top-k with a selection-only bias,
// or hash routing through tid2eid), routed SwiGLU experts with the swiglu_limit clamp, routed
// scaling, and the shared expert. Each token sums its experts in ascending expert id, so its output
// does not depend on the other tokens in the batch — nor, under expert parallelism, on the rank
// that ran each of its experts.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "base/thread_pool.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "io/model_config.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

// x: [N, D] (ffn_norm output), ids: [N] token ids (hash routing) -> out: [N, D].
void MoeForward(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                const int32_t* ids, int64_t n, float* out, ThreadPool* pool);

// One rank's part in an expert-parallel MoE layer: the group, the layer's placement (w holds the
// routed experts placement->ExpertsOf(comm->rank())), and the rank's routing counts.
struct MoeParallel {
  distributed::Communicator* comm = nullptr;
  const distributed::ExpertPlacement* placement = nullptr;
  int64_t* load = nullptr;    // [E] += this rank's rows routed to each expert (null: not counted)
  int64_t* served = nullptr;  // += the rows this rank's experts computed (null: not counted)
};

// MoeForward under expert parallelism, called by every rank of ep.comm's group for the layer (n
// may be 0): each rank routes its own rows, sends each (row, expert) pair to the rank that
// ep.placement picks for it (two all-to-alls: the rows out, the expert outputs back), runs its
// experts over the rows it received, and combines its rows' expert outputs as MoeForward does, so
// out is MoeForward's bit for bit. An error of the group (another rank failed) is returned.
Status MoeForwardParallel(const MoeWeights& w, const io::DeepseekV4Config& c, const float* x,
                          const int32_t* ids, int64_t n, float* out, ThreadPool* pool,
                          const MoeParallel& ep);

}  // namespace dsinfer::model::deepseek_v4
