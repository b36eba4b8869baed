// Per-request model state of DeepSeek-V4.1, kept by absolute position so that any prefill chunking
// and token-by-token decoding give identical results:
//
//   every layer:      window K=V ring   [W slots, d]  (slot = position mod W; FP8-simulated rows)
//   KV source layer:  pending compressor rows of the open group (ratio > 1): [< ratio, 2d] fp32
//                     compressed KV entries   [G, d]   (RoPE'd, FP4-simulated; shared by the group)
//                     index-key entries       [G, Id]  (RoPE'd, FP4-simulated; shared by the group)
// The other layers of a group ("Reuse" / "Reindex") hold only their window: they read the
// source's entries. Top-k picks and the candidate-block mask are per query token and live only
// for one forward call (model.cc). Heap-backed (the paged cache/ layout is a later step). Owned by
// one request; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "io/deepseek_v41_config.h"

namespace dsinfer::model::deepseek_v41 {

struct LayerState {
  std::vector<float> window;   // [W, d] ring by position
  std::vector<float> pending;  // [pending_rows, 2d]: compressor kv | gate rows of the open group
  int64_t pending_rows = 0;
  std::vector<float> comp_entries;   // [entries, d]
  std::vector<float> index_entries;  // [entries, index_head_dim]
  int64_t entries = 0;
};

class SequenceState {
 public:
  explicit SequenceState(const io::DeepseekV41Config& config);
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  // Tokens processed (= the next position).
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  LayerState& layer(int i) { return layers_[i]; }
  const LayerState& layer(int i) const { return layers_[i]; }

 private:
  int64_t length_ = 0;
  std::vector<LayerState> layers_;
};

}  // namespace dsinfer::model::deepseek_v41
