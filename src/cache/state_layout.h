// StateLayout: the bytes of one request's model state as a function of its length, derived from the
// DeepSeek-V4 config (spec §3.1-3.2) and grouped into components of equal row geometry:
//   window       every layer + MTP: a ring of W-1+slack K=V rows               (fixed per request)
//   compressor   CSA main + indexer rows (2*rate+slack), HCA rows (rate+slack)  (fixed per request)
//   compressed   CSA/HCA compressed KV entries: floor(length/rate) rows         (grows)
//   index_keys   CSA indexer keys: floor(length/rate) rows                      (grows)
// The model (model/deepseek_v4/state.h) stores rings at full capacity from the first token, so a
// ring component always counts its full capacity; ExactBytes(n) equals SequenceState::bytes()
// after n tokens. Immutable value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace dsinfer::cache {

enum class StateKind { kWindow, kCompressor, kCompressed, kIndexKeys };

const char* StateKindName(StateKind kind);

struct StateComponent {
  std::string name;            // e.g. "compressed/rate4"
  StateKind kind = StateKind::kWindow;
  int64_t bytes_per_row = 0;   // summed over the layers that share this geometry
  int64_t ring_rows = 0;       // > 0: a ring of this many rows; 0: grows with the length
  int64_t tokens_per_row = 1;  // growing components: one row per this many tokens

  bool ring() const { return ring_rows > 0; }
  int64_t Rows(int64_t length) const { return ring() ? ring_rows : length / tokens_per_row; }
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

}  // namespace dsinfer::cache
