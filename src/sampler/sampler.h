// Sampler: turns one row of logits into a token for one sequence, in this order (vLLM's):
//   grammar mask -> logit_bias -> min_tokens mask (EOS, stop ids) -> repetition / presence /
//   frequency penalties
//   -> greedy argmax, or: temperature -> softmax -> top-k -> top-p -> min-p -> inverse-CDF draw.
// The arithmetic of the draw is backend/sample_row.h's, which the CUDA sampling kernel shares:
// given the same logits, both pick the same token. A SampleInput becomes a RowDraw (the per-id
// edits and the scalar parameters, MakeRowDraw) that either backend runs. The draw uses the 53-bit
// uniform UniformBitsAt(seed, position, sample_index) (philox.h), so the token depends only on the
// logits and (seed, position, sample index): never on the batch. Weights are exact integers, so
// sums do not depend on their order; ties in the candidate order go to the lower id. Logprobs are
// those of the model's distribution (log_softmax of the raw logits), as vLLM returns by default.
// Stateless apart from scratch buffers: one Sampler per engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/sample_row.h"
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
  // Outputs that follow `history` for this draw (a speculative verify row: the drafts before it),
  // counted by the penalties and min_tokens as if added to it.
  const int32_t* pending = nullptr;
  int num_pending = 0;
  uint64_t seed = 0;                      // the request's seed (the engine picks one if unset)
  uint32_t sample_index = 0;              // which of the n completions
  int64_t position = 0;                   // absolute position of the token being drawn
  int32_t eos_id = -1;
  // Ids the model cannot take back as input (ModelInfo::refused_ids): never drawn.
  const std::vector<int32_t>* refused = nullptr;
  // >= 0: no draw: this token (a prompt token being scored) with its logprob and `forced_top`
  // alternatives under the model's distribution.
  int32_t forced = -1;
  int forced_top = 0;
  // Allowed-token bitmask (bit id % 64 of word id / 64; structured/token_automaton.h), or null.
  // Disallowed ids get -inf before every other step, so the draw stays a pure function of
  // (logits, mask, seed, position, sample index).
  const uint64_t* allowed = nullptr;
};

// One row's draw as a backend runs it (backend/sample_row.h's arithmetic).
struct RowDraw {
  std::vector<backend::SampleEdit> edits;  // one per id whose processing differs, ids ascending
  const uint64_t* allowed = nullptr;       // SampleInput::allowed
  bool greedy = false;
  float inv_temperature = 1.0f;  // 1 / temperature, in float
  int top_k = 0;                 // 0: off (also when top_k >= vocab)
  float top_p = 1.0f;            // 1: off
  float min_p = 0.0f;            // 0: off
  uint64_t uniform = 0;          // 53 random bits: UniformBitsAt(seed, position, index)
  bool logprobs = false;         // the chosen token's logprob
  int top_logprobs = 0;          // and this many alternatives
  int32_t forced = -1;           // >= 0: no draw, this token (SampleInput::forced)
};
RowDraw MakeRowDraw(const SampleInput& in, int64_t vocab);

class Sampler {
 public:
  // logits: [vocab] fp32 of one row.
  SampledToken Sample(const float* logits, int64_t vocab, const SampleInput& in) {
    return Draw(logits, vocab, MakeRowDraw(in, vocab));
  }
  SampledToken Draw(const float* logits, int64_t vocab, const RowDraw& d);

  // The probability of every id under `in`'s processing (for tests and debugging): [vocab].
  std::vector<double> Probabilities(const float* logits, int64_t vocab, const SampleInput& in);

 private:
  // scratch_ = the processed logits (mask and edits applied), times inv_temperature unless greedy.
  void Process(const float* logits, int64_t vocab, const RowDraw& d);
  // kept_ = the candidates after top-k / top-p / min-p, ids ascending, with weights in weight_
  // (sample_row.h's integers). Needs scratch_ from Process of a non-greedy draw.
  void Truncate(int64_t vocab, const RowDraw& d);
  // The greedy pick: the argmax of scratch_, ties to the lower id.
  int32_t Argmax() const;

  std::vector<float> scratch_;
  std::vector<int64_t> bucket_mass_;  // top-p buckets
  std::vector<int32_t> order_;
  std::vector<int32_t> kept_;
  std::vector<int64_t> weight_;
};

}  // namespace dsinfer::sampler
