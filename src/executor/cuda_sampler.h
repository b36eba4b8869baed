// CudaSampler: the engine's draws made on the GPU by backend/cuda's sampling kernel, right behind
// the CUDA model's forward on its stream. Each step's draw parameters, per-id edits and grammar
// masks go up in one copy and the ids and logprobs come back in one: the logits never leave the
// device. Given the same logits it picks the CPU sampler's tokens (backend/sample_row.h).
// CUDA builds only; one thread at a time (the engine thread's runner owns it).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/runtime.h"
#include "executor/model_runner.h"
#include "sampler/sampler.h"

namespace dsinfer::executor {

class CudaSampler {
 public:
  explicit CudaSampler(int64_t vocab) : vocab_(vocab) {}

  // logits: [rows, vocab] fp32 on the device, written by work already enqueued on `stream`; draw
  // i reads row draws[i].chunk. Synchronizes on the stream (to read the ids).
  std::vector<sampler::SampledToken> Sample(const float* logits, const std::vector<RunDraw>& draws,
                                            backend::cuda::StreamHandle stream);

 private:
  int64_t vocab_;
  backend::cuda::PinnedBuffer in_host_, out_host_;
  backend::cuda::DeviceBuffer in_dev_, out_dev_, scratch_;
};

}  // namespace dsinfer::executor
