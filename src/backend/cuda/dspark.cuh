// DeepSeek-V4.1's DSpark drafter on the device: the ops its executor path needs beyond the
// backbone's (the CPU reference, which the layering keeps out of reach of this folder:
// model/deepseek_v41/dspark.cc and model.cc):
//   LaunchStreamMean:      a target layer's tap, the mean of a row's hc streams (summed in stream
//                          order, then divided by hc: the CPU's bits).
//   LaunchDSparkAttention: each block slot's heads over its request's context rows (the last W
//                          context K=V rows, gathered) and all B rows of its block (bidirectional),
//                          the sink in the softmax; then the inverse RoPE of the output's trailing
//                          rope dims at the slot's position (as the backbone's attention does).
//   LaunchDSparkCollapse:  the head's input before its norm: a row's streams collapsed with the
//                          last site's weights (sum_i pre_i X_i, the CPU's HcCollapse order).
//   LaunchDSparkGatherContext: each request's last W context rows out of a stage's ring (by
//                          position, before its block), contiguous for the attention.
//   LaunchMarkovStep:      one slot of every request: the Markov term head_r · embed_r[prev] added
//                          to the slot's logits row, its greedy id (ties to the smallest id), the
//                          confidence logit proj · [xh ; embed_r[prev]] (sums in double); the id
//                          becomes the request's prev for the next slot. Two kernels: the term
//                          over vocab tiles (a head row read once per 8 requests; each logit's
//                          fma chain over the rank is fixed), then the pick and the confidence
//                          per request.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct StreamMeanParams {
  const float* x = nullptr;  // [n, hc, dim]
  int64_t n = 0;
  int hc = 0;
  int64_t dim = 0;
  float* out = nullptr;  // row t at out + t * ld
  int64_t ld = 0;
  Status Validate() const;
};
void LaunchStreamMean(const StreamMeanParams& p, StreamHandle stream);

struct DSparkAttentionParams {
  const float* q = nullptr;      // [n, heads, dim], RoPE applied (or q_rope); n = requests * block
  const float* block = nullptr;  // [n, dim] the block rows' K=V (RoPE, FP8 grid)
  const float* ctx = nullptr;    // [requests, ctx_stride, dim] each request's context K=V rows
  const int32_t* ctx_len = nullptr;  // [requests] rows of ctx in use (<= ctx_stride)
  int64_t ctx_stride = 0;
  int64_t requests = 0;
  int block_size = 0;
  int heads = 0;
  int dim = 0;
  const float* sink = nullptr;  // [heads]
  float scale = 0.0f;
  int rope_dim = 0;
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  const int32_t* positions = nullptr;  // [n] each slot's position (the RoPEs)
  float* out = nullptr;                // [n, heads, dim]
  // The query's RoPE (its trailing rope dims at the slot's position) applied here, as it is read
  // (the backbone's SparseAttentionParams::q_rope: the same rotation).
  bool q_rope = false;
  Status Validate() const;
};
void LaunchDSparkAttention(const DSparkAttentionParams& p, StreamHandle stream);

struct DSparkCollapseParams {
  const float* x = nullptr;    // [n, hc, dim]
  const float* pre = nullptr;  // [n, hc]
  int64_t n = 0;
  int hc = 0;
  int64_t dim = 0;
  float* out = nullptr;  // [n, dim]
  Status Validate() const;
};
void LaunchDSparkCollapse(const DSparkCollapseParams& p, StreamHandle stream);

struct DSparkGatherParams {
  RingRef ring;                    // a stage's context ring (width = dim)
  const int32_t* slot = nullptr;   // request r's table row at slot[r * stride]
  const int32_t* start = nullptr;  // request r's block's first position (= its length L)
  int64_t stride = 1;
  int64_t requests = 0;
  int64_t window = 0;  // W: rows max(0, L - W) .. L - 1 are gathered
  int64_t dim = 0;
  float* out = nullptr;    // [requests, window, dim]
  int32_t* len = nullptr;  // [requests] rows gathered
  Status Validate() const;
};
void LaunchDSparkGatherContext(const DSparkGatherParams& p, StreamHandle stream);

struct MarkovStepParams {
  float* logits = nullptr;  // request r's slot row at logits + r * ld_logits [vocab], in/out
  int64_t ld_logits = 0;
  int64_t requests = 0;
  int64_t vocab = 0;
  int rank = 0;                 // 0: no Markov term
  const void* embed = nullptr;  // [vocab, rank] (bf16 when bf16, else fp32)
  const void* head = nullptr;   // [vocab, rank]
  bool bf16 = false;
  int32_t* prev = nullptr;    // [requests] in: the previous token; out: this slot's draft
  const float* xh = nullptr;  // request r's slot row at xh + r * ld_xh [hidden]
  int64_t ld_xh = 0;
  int64_t hidden = 0;
  const float* confidence_w = nullptr;  // [hidden + rank]
  float* confidence = nullptr;          // [requests] out: the confidence logit
  int32_t* ids = nullptr;               // [requests] out: this slot's draft (also in prev)
  // Scratch [requests, MarkovStepTiles(vocab)]: each vocab tile's best (value, id) per request.
  float* best_v = nullptr;
  int32_t* best_i = nullptr;
  Status Validate() const;
};
int64_t MarkovStepTiles(int64_t vocab);
void LaunchMarkovStep(const MarkovStepParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
