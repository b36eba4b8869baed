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
// Owned by one request; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "io/model_config.h"

namespace dsinfer::model::deepseek_v4 {

// Fixed-width rows addressed by absolute position, keeping the newest `capacity` of them.
class PositionRing {
 public:
  PositionRing() = default;
  PositionRing(int64_t capacity, int64_t width);

  int64_t width() const { return width_; }
  int64_t capacity() const { return capacity_; }
  // Positions [oldest(), end()) are readable.
  int64_t end() const { return end_; }
  int64_t oldest() const { return oldest_; }
  const float* Row(int64_t pos) const;
  // Appends the row of position end().
  void Append(const float* row);
  // Forgets positions >= new_end; rows below it stay readable.
  void Truncate(int64_t new_end);
  size_t bytes() const { return data_.size() * sizeof(float); }

 private:
  int64_t capacity_ = 0;
  int64_t width_ = 0;
  int64_t end_ = 0;
  int64_t oldest_ = 0;
  std::vector<float> data_;
};

// Append-only list of fixed-width entries (compressed KV / index keys).
struct EntryList {
  int64_t width = 0;
  std::vector<float> data;  // [count, width]
  int64_t count() const { return width ? static_cast<int64_t>(data.size()) / width : 0; }
  const float* Row(int64_t i) const { return data.data() + i * width; }
  void Append(const float* row) { data.insert(data.end(), row, row + width); }
  void Truncate(int64_t n) { data.resize(static_cast<size_t>(n * width)); }
};

struct LayerState {
  int compress_rate = 0;
  PositionRing window;       // [pos] -> K=V row [head_dim]
  PositionRing comp_rows;    // [pos] -> [kv (width) | gate + ape (width)]
  EntryList comp_entries;    // [w] -> [head_dim]
  PositionRing index_rows;   // CSA: indexer compressor rows
  EntryList index_entries;   // CSA: [w] -> [index_head_dim]
};

class SequenceState {
 public:
  // `rollback_slack`: how many trailing tokens Rollback may remove.
  SequenceState(const io::DeepseekV4Config& config, int rollback_slack = 16);

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

  size_t bytes() const;

 private:
  int64_t length_ = 0;
  int64_t mtp_length_ = 0;
  int rollback_slack_;
  std::vector<LayerState> layers_;  // num_layers + 1 (MTP)
};

}  // namespace dsinfer::model::deepseek_v4
