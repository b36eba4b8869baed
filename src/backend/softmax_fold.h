// The chunked online softmax of the sparse attention with a sink, shared by the CPU reference of
// DeepSeek-V4's FP8-cache attention (backend/cpu/attention.cc, AttendHeadBf16) and the
// tensor-core kernel (backend/cuda/attention_sparse_tc_sm90.cu), so that both fold a row's key
// chunks with the same operations. Header-only for the host and the device, no CUDA headers.
//
// A row's keys go in chunks of kSoftmaxChunk in list order. A chunk's partial is its own max mc,
// its sum of e_j = exp(z_j - mc) and its P V; the running (max M, sum L, output O) takes it as
//   M' = max(M, mc), a = exp(M - M'), b = exp(mc - M'), X' = fma(x, b, X * a)
// (FoldScales, Fold; M starts at -inf, so a = 0 for the first chunk), and the output is O times
// OutFactor(M, L, sink): the sink is a key of logit `sink` and value zero in the denominator.
#pragma once

#include <cmath>

#include "backend/float_bits.h"

#if defined(__CUDACC__)
#define DSINFER_SOFTMAX_FN __host__ __device__ __forceinline__
#else
#define DSINFER_SOFTMAX_FN inline
#endif

namespace dsinfer::backend::softmax {

// Keys per chunk: the tensor-core kernel's step (its P is rounded to bf16 relative to the chunk's
// own max with the FP8 cache: so the chunking is part of that mode's result).
inline constexpr int kChunk = 32;

DSINFER_SOFTMAX_FN void FoldScales(float m_run, float mc, float* m_new, float* a, float* b) {
  *m_new = fmaxf(m_run, mc);
  *a = expf(m_run - *m_new);  // nothing yet (-inf): 0
  *b = expf(mc - *m_new);
}
DSINFER_SOFTMAX_FN float Fold(float run, float part, float a, float b) {
  return FmaRn(part, b, MulRn(run, a));
}
// The output's factor for a head: its weight over the softmax denominator with the sink.
DSINFER_SOFTMAX_FN float OutFactor(float m_run, float l_run, float sink) {
  const float M = fmaxf(m_run, sink);
  const float w = m_run == -INFINITY ? 0.0f : expf(m_run - M);  // no keys: 0
  return w / (l_run * w + expf(sink - M));
}

}  // namespace dsinfer::backend::softmax
