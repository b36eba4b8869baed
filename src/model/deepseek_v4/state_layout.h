// StateLayout: where a request's model state lives, derived from the DeepSeek-V4 config (spec
// §3.1-3.2). The state is grouped into components of equal row geometry; each component stores,
// per row index, one row for every member (a layer's window ring, compressor ring, compressed
// entries or index keys) — the layout a paged pool hands out and a device kernel addresses:
//   window       every layer + MTP: a ring of W-1+slack K=V rows               (fixed per request)
//   compressor   CSA main + indexer rows (2*rate+slack), HCA rows (rate+slack)  (fixed per request)
//   compressed   CSA/HCA compressed KV entries: floor(length/rate) rows         (grows)
//   index_keys   CSA indexer keys: floor(length/rate) rows                      (grows)
// Within a page of P rows, member m occupies floats [offset_m * P, (offset_m + width_m) * P), row r
// at (offset_m * P + (r % P) * width_m). ExactBytes(n) equals SequenceState::bytes() after n
// tokens. Immutable value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace dsinfer::model::deepseek_v4 {

enum class StateKind { kWindow, kCompressor, kCompressed, kIndexKeys };
const char* StateKindName(StateKind kind);

// Which per-layer stream of SequenceState a member is.
enum class StateStream { kWindow, kCompressorRows, kIndexRows, kCompressed, kIndexKeys };

struct StateMember {
  int layer = 0;          // 0..num_layers-1, num_layers = MTP
  StateStream stream = StateStream::kWindow;
  int64_t width = 0;      // floats per row
  int64_t offset = 0;     // floats before this member within one row of the component
};

struct StateComponent {
  std::string name;            // e.g. "compressed/rate4"
  StateKind kind = StateKind::kWindow;
  int64_t bytes_per_row = 0;   // summed over the members
  int64_t ring_rows = 0;       // > 0: a ring of this many rows; 0: grows with the length
  int64_t tokens_per_row = 1;  // growing components: one row per this many tokens
  std::vector<StateMember> members;

  bool ring() const { return ring_rows > 0; }
  int64_t Rows(int64_t length) const { return ring() ? ring_rows : length / tokens_per_row; }
  int64_t floats_per_row() const { return bytes_per_row / static_cast<int64_t>(sizeof(float)); }
};

class StateLayout {
 public:
  static StateLayout ForDeepseekV4(const io::DeepseekV4Config& config, int rollback_slack);

  const std::vector<StateComponent>& components() const { return components_; }
  // Bytes of the state after `length` tokens, without page rounding.
  int64_t ExactBytes(int64_t length) const;
  // Fixed bytes per request (the rings) and bytes per token of the growing parts (averaged).
  int64_t FixedBytes() const;
  double BytesPerToken() const;

 private:
  std::vector<StateComponent> components_;
};

}  // namespace dsinfer::model::deepseek_v4
