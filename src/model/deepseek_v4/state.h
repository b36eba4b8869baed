// Per-request model state of DeepSeek-V4 (spec §3), kept by absolute position so that any prefill
// chunking and token-by-token decoding give identical results, and so that the last k tokens can be
// rolled back (spec §3.4) as long as k <= the rollback slack chosen at construction.
//
//   every layer:  window K=V rows                          (ring by position, >= W-1 + slack rows)
//   CSA layer:    compressor rows (a, b + ape) per token   (ring, >= 2*rate + slack rows)
//                 compressed KV entries, index-key entries (append-only lists)
//                 indexer compressor rows                  (ring)
//   HCA layer:    compressor rows                          (ring, >= rate + slack rows)
//                 compressed KV entries                    (append-only list)
//   MTP layer:    its own window rows
// The memory is paged as StateLayout says (state_layout.h): the rows come from StatePages, either
// the engine's state cache (pages of its pools) or private heap pages. A SequenceState is owned
// by one request; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"
#include "model/deepseek_v4/state_layout.h"
#include "model/paged_state.h"

namespace dsinfer::model::deepseek_v4 {

using model::EntryList;
using model::HeapStatePages;
using model::PagedRows;
using model::PositionRing;

// window: [pos] -> K=V row [head_dim]; comp_rows: [pos] -> [kv (width) | gate + ape (width)];
// comp_entries: [w] -> [head_dim]; CSA: index_rows (the indexer compressor's) and index_entries
// [w] -> [index_head_dim].
struct LayerState : model::LayerStreams {
  int compress_rate = 0;
  bool has_index = false;  // CSA
};

class SequenceState {
 public:
  // Heap-backed state. `rollback_slack`: how many trailing tokens Rollback may remove.
  SequenceState(const io::DeepseekV4Config& config, int rollback_slack = 16);
  // State in `pages` (not owned; must outlive this), laid out as `layout`, which must be
  // DeepseekV4StateLayout(config, rollback_slack).
  SequenceState(const io::DeepseekV4Config& config, int rollback_slack, const StateLayout& layout,
                StatePages* pages);
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  // Tokens processed by the main model (= the next position).
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  // Rows processed by the MTP layer.
  int64_t mtp_length() const { return mtp_length_; }
  void set_mtp_length(int64_t n) { mtp_length_ = n; }
  int rollback_slack() const { return rollback_slack_; }

  // Layer `i` in [0, num_layers); `num_layers` addresses the MTP layer.
  LayerState& layer(int i) { return layers_[i]; }
  const LayerState& layer(int i) const { return layers_[i]; }

  // Returns the state to what it was after the first `new_length` tokens (and MTP rows).
  // OutOfRange when more than rollback_slack tokens would be removed.
  Status Rollback(int64_t new_length);
  // Returns the MTP layer alone to its first `new_mtp_length` rows (drafts chained past the main
  // model's rows are dropped this way). OutOfRange beyond the slack.
  Status RollbackMtp(int64_t new_mtp_length);
  // Becomes a copy of `other` (same config and slack), e.g. to fork n > 1 completions.
  void CopyFrom(const SequenceState& other);

  size_t bytes() const;

 private:
  void Bind(const io::DeepseekV4Config& config, const StateLayout& layout, StatePages* pages);

  int64_t length_ = 0;
  int64_t mtp_length_ = 0;
  int rollback_slack_;
  std::unique_ptr<StatePages> own_pages_;  // heap pages when no external pages were given
  std::vector<LayerState> layers_;         // num_layers + 1 (MTP)
};

}  // namespace dsinfer::model::deepseek_v4
