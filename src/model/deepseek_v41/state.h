// Per-request model state of DeepSeek-V4.1, kept by absolute position so that any prefill chunking
// and token-by-token decoding give identical results, and so that the last k <= rollback_slack
// tokens can be rolled back (speculative verification):
//
//   every layer:      window K=V ring          [>= W-1+slack rows]  (FP8 rows, packed)
//   KV source layer:  compressor input ring    [>= r+slack rows] (ratio r > 1: [kv | gate] fp32)
//                     compressed KV entries    [floor(length/r)]  (FP4 rows, packed; the group's)
//                     index-key entries        [floor(length/r)]  (FP4 rows, packed; the group's)
//   Engram configs:   token ids by position    [N-1+slack rows]   (the n-gram look-back)
//   DSpark drafter:   per stage a context ring [W+slack rows]     (FP8 rows, packed)
// The other layers of a group (Reuse / Reindex) hold only their window: they read the source's
// entries. Top-k picks and the candidate-block mask are per query token and live only for one
// forward call (batch.h). Entry g of ratio r is emitted when position r·g + r − 1 is processed;
// the open group's inputs come from the ring, so rolling back to n' truncates the lists to
// floor(n'/r) entries and the rings to n'. The memory is paged as state_layout.h says: the rows
// come from StatePages, either the engine's state cache (pages of its pools) or private heap
// pages. Owned by one request; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/paged_state.h"

namespace dsinfer::model::deepseek_v41 {

// window: [pos] -> packed K=V row (WindowFormat); a KV source's comp_rows (ratio > 1): [pos] ->
// [x·wkvᵀ | x·wgateᵀ] [2d] fp32, comp_entries: [g] -> packed KV entry (EntryFormat),
// index_entries: [g] -> packed index key (IndexKeyFormat). index_rows is not used.
struct LayerState : model::LayerStreams {
  int ratio = 0;        // the layer's compress ratio
  bool source = false;  // a KV source (owns the compressed streams)
  int64_t entries() const { return comp_entries.count(); }
};

class SequenceState {
 public:
  // Heap-backed state. `rollback_slack`: how many trailing tokens Rollback may remove; `dspark`:
  // with the DSpark drafter's context rings.
  explicit SequenceState(const io::DeepseekV41Config& config, int rollback_slack = 16,
                         bool dspark = false);
  // State in `pages` (not owned; must outlive this), laid out as `layout`, which must be
  // DeepseekV41StateLayout(config, rollback_slack[, dspark]).
  SequenceState(const io::DeepseekV41Config& config, int rollback_slack,
                const cache::StateLayout& layout, StatePages* pages);
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  // Tokens processed (= the next position).
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  int rollback_slack() const { return rollback_slack_; }
  LayerState& layer(int i) { return layers_[i]; }
  const LayerState& layer(int i) const { return layers_[i]; }
  // Engram configs: [pos] -> the token id (int32 bits) of the last N-1+slack positions; an
  // unbound ring (capacity 0) otherwise.
  PositionRing& tokens() { return tokens_; }
  const PositionRing& tokens() const { return tokens_; }
  // The DSpark drafter's context ring of stage s ([pos] -> packed K=V row, WindowFormat); none
  // without the drafter.
  int draft_stages() const { return static_cast<int>(draft_.size()); }
  PositionRing& draft(int s) { return draft_[static_cast<size_t>(s)]; }
  const PositionRing& draft(int s) const { return draft_[static_cast<size_t>(s)]; }
  // The token at `pos` (within the ring).
  int32_t TokenAt(int64_t pos) const;
  void AppendToken(int32_t id);

  // Returns the state to what it was after its first `new_length` tokens; OutOfRange when more
  // than rollback_slack tokens would be removed.
  Status Rollback(int64_t new_length);
  // Becomes a copy of `other` (same config and slack), e.g. to fork n > 1 completions.
  void CopyFrom(const SequenceState& other);
  // Bytes of the state's rows (DeepseekV41StateLayout(...).ExactBytes(length())).
  size_t bytes() const;

 private:
  void Bind(const io::DeepseekV41Config& config, const cache::StateLayout& layout,
            StatePages* pages);

  int64_t length_ = 0;
  int rollback_slack_;
  std::unique_ptr<StatePages> own_pages_;  // heap pages when no external pages were given
  std::vector<LayerState> layers_;
  PositionRing tokens_;
  std::vector<PositionRing> draft_;
};

}  // namespace dsinfer::model::deepseek_v41
