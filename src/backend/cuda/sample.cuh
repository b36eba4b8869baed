// Sampling on the GPU: one block per draw turns a row of fp32 logits into a token with
// backend/sample_row.h's arithmetic — the CPU sampler's (sampler/sampler.cc) — so that given the
// same logits both pick the same token: the grammar mask and per-id edits (logit_bias, min_tokens,
// penalties), greedy argmax or temperature + top-k + top-p + min-p and the inverse-CDF draw at
// the host-computed 53-bit uniform, the chosen token's logprob and the top logprobs. Selection by
// key is a radix select over 64-bit keys (x desc, id asc); weights are exact integers, so every
// sum is independent of the order the threads add them in: deterministic and batch-invariant.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/sample_row.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

constexpr int kMaxTopLogprobs = 20;

// One draw (POD, uploaded per step).
struct SampleRow {
  int32_t logits_row = 0;  // which row of SampleRowsParams::logits
  int32_t greedy = 0;
  float inv_temperature = 1.0f;
  int32_t top_k = 0;       // 0: off (0 < top_k < vocab otherwise)
  float top_p = 1.0f;      // 1: off
  float min_p = 0.0f;      // 0: off
  uint64_t uniform = 0;    // 53 random bits
  int32_t edit_begin = 0;  // SampleRowsParams::edits[edit_begin, +edit_count), ids ascending
  int32_t edit_count = 0;
  int64_t mask_word = -1;    // allowed-token bitmask at SampleRowsParams::masks + mask_word, or -1
  int32_t logprobs = 0;      // 1: the chosen token's logprob (and top_logprobs alternatives)
  int32_t top_logprobs = 0;  // [0, kMaxTopLogprobs]
  int32_t forced = -1;       // >= 0: no draw, this token (scoring a prompt token); logprobs on
};

struct SampleRowsParams {
  const float* logits = nullptr;  // [*, vocab] fp32
  int64_t vocab = 0;
  int64_t num_rows = 0;  // draws
  // Per-draw parameters [num_rows], or null: every draw r is greedy on logits row r, unedited.
  const SampleRow* rows = nullptr;
  const SampleEdit* edits = nullptr;  // [sum of edit_count]
  const uint64_t* masks = nullptr;    // [*] 64-bit words, bit id % 64 of word id / 64
  float* scratch = nullptr;           // [num_rows, vocab] fp32 (needed when rows is set)
  int32_t* out_id = nullptr;          // [num_rows]
  float* out_logprob = nullptr;       // [num_rows] (rows with logprobs)
  int32_t* out_top_id = nullptr;      // [num_rows, kMaxTopLogprobs]
  float* out_top_logprob = nullptr;   // [num_rows, kMaxTopLogprobs]
  // Every draw is greedy with no edits, mask or logprobs (or rows is null): a row's argmax runs on
  // a cluster of blocks with wide loads (the decode step's common case; the same ids).
  bool plain_greedy = false;

  Status Validate() const;
};
void LaunchSampleRows(const SampleRowsParams& p, StreamHandle stream);

// Overlap scheduling: ids[r] = source[feed[r]] for the rows r < n with feed[r] >= 0 (tokens a
// previous step drew on the device, which the host has not read back).
void LaunchFeedTokens(int32_t* ids, const int32_t* feed, const int32_t* source, int64_t n,
                      StreamHandle stream);

}  // namespace dsinfer::backend::cuda
