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
  // At most max_draws draws per call.
  CudaSampler(int64_t vocab, int64_t max_draws);

  // logits: [rows, vocab] fp32 on the device, written by work already enqueued on `stream`; draw
  // i reads row draws[i].chunk. Enqueues the draws and the copy of their results to the host.
  void Enqueue(const float* logits, const std::vector<RunDraw>& draws,
               backend::cuda::StreamHandle stream);
  // Waits for the last Enqueue's results (each Enqueue is collected before the next).
  std::vector<sampler::SampledToken> Collect();
  // Both.
  std::vector<sampler::SampledToken> Sample(const float* logits, const std::vector<RunDraw>& draws,
                                            backend::cuda::StreamHandle stream);
  // The last Enqueue's ids on the device ([draws] int32, at a fixed address): what the next
  // forward's fed tokens read.
  const int32_t* device_ids() const { return out_dev_.as<int32_t>(); }

 private:
  int64_t vocab_, max_draws_;
  backend::cuda::PinnedBuffer in_host_, out_host_;
  backend::cuda::DeviceBuffer in_dev_, out_dev_, scratch_;
  backend::cuda::Event done_;
  // The enqueued draws: count, and per draw whether it returns logprobs and how many alternatives.
  int64_t pending_ = -1;
  std::vector<uint8_t> logprobs_;
  std::vector<int> top_;
};

}  // namespace dsinfer::executor
