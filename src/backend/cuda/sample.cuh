// GPU sampling over fp32 logits rows: greedy (argmax, ties to the lower id) or Gumbel-max at a
// temperature, with a counter-based RNG keyed by (seed, request, position, token id), so a seeded
// request samples the same token alone or in any batch (ARCHITECTURE.md §4).
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

struct SampleParams {
  const float* logits = nullptr;   // [rows, vocab]
  int64_t rows = 0;
  int64_t vocab = 0;
  float temperature = 0.0f;        // <= 0: greedy
  uint64_t seed = 0;
  const int32_t* request = nullptr;   // [rows] request ids (RNG key), or null (0)
  const int32_t* position = nullptr;  // [rows] positions (RNG key), or null (row index)
  int32_t* out = nullptr;          // [rows] sampled ids
};
void LaunchSample(const SampleParams& p, StreamHandle stream);

// The counter-based uniform in (0, 1) used by LaunchSample (exposed for tests): Philox-style mixing
// of (seed, request, position, token) through a SplitMix64 cascade.
double SampleUniformHost(uint64_t seed, int32_t request, int32_t position, int64_t token);

}  // namespace dsinfer::backend::cuda
