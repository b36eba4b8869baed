// Sampler: turns one row of logits into a token for one sequence, in this order (vLLM's):
//   grammar mask -> logit_bias -> min_tokens mask (EOS, stop ids) -> repetition / presence /
//   frequency penalties
//   -> greedy argmax, or: temperature -> softmax -> top-k -> top-p -> min-p -> inverse-CDF draw.
// The draw uses u = UniformAt(seed, position, sample_index) (philox.h), so the token depends only
// on the logits and (seed, position, sample index): never on the batch. Candidates are ordered by
// (probability desc, id asc), which makes ties deterministic too.
// Logprobs are those of the model's distribution (log_softmax of the raw logits), as vLLM returns
// by default. Stateless apart from scratch buffers: one Sampler per engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "sampler/sampling_params.h"
#include "sampler/token_history.h"

namespace dsinfer::sampler {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t id = 0;
  float logprob = 0;               // of `id` (set when params.logprobs or top_logprobs > 0)
  std::vector<TokenLogprob> top;   // params.top_logprobs most likely ids, most likely first
};

// Everything about the sequence that the draw depends on.
struct SampleInput {
  const SamplingParams* params = nullptr;
  const TokenHistory* history = nullptr;  // may be null: no penalties
  uint64_t seed = 0;                      // the request's seed (the engine picks one if unset)
  uint32_t sample_index = 0;              // which of the n completions
  int64_t position = 0;                   // absolute position of the token being drawn
  int32_t eos_id = -1;
  // Allowed-token bitmask (bit id % 64 of word id / 64; structured/token_automaton.h), or null.
  // Disallowed ids get -inf before every other step, so the draw stays a pure function of
  // (logits, mask, seed, position, sample index).
  const uint64_t* allowed = nullptr;
};

class Sampler {
 public:
  // logits: [vocab] fp32 of one row.
  SampledToken Sample(const float* logits, int64_t vocab, const SampleInput& in);

  // The probability of every id under `in`'s processing (for tests and debugging): [vocab].
  std::vector<double> Probabilities(const float* logits, int64_t vocab, const SampleInput& in);

 private:
  // Applies bias, masks and penalties to scratch_ (a copy of logits).
  void Process(const float* logits, int64_t vocab, const SampleInput& in);
  // The kept candidates after top-k/top-p/min-p with their unnormalized weights, most likely first.
  void Truncate(int64_t vocab, const SamplingParams& p);

  std::vector<float> scratch_;
  std::vector<float> expw_;          // [vocab] exp(x - max)
  std::vector<double> bucket_mass_;  // top-p buckets
  std::vector<int32_t> order_;
  std::vector<int32_t> cand_;
  std::vector<double> weight_;
};

}  // namespace dsinfer::sampler
