// StateLayout: how a request's model state is laid out in pages, as a model-agnostic spec that the
// model fills in (model/deepseek_v4/state_layout.h for DeepSeek-V4, spec §3.1-3.2). The state is
// grouped into components of equal row geometry; each component stores, per row index, one row for
// every member (e.g. one layer's window ring or compressed entries) — the layout a paged pool hands
// out and a device kernel addresses. A component is either a ring of fixed rows per request or a
// list that grows by one row per `tokens_per_row` tokens.
// Within a page of P rows, member m occupies floats [offset_m * P, (offset_m + width_m) * P), row r
// at (offset_m * P + (r % P) * width_m). Immutable value type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsinfer::cache {

enum class StateKind { kWindow, kCompressor, kCompressed, kIndexKeys };
const char* StateKindName(StateKind kind);

struct StateMember {
  int layer = 0;       // the model's layer index of this member
  int stream = 0;      // which of the layer's state streams (its meaning is the model's)
  int64_t width = 0;   // floats per row
  int64_t offset = 0;  // floats before this member within one row of the component
};

struct StateComponent {
  std::string name;  // e.g. "compressed/rate4"
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
  StateLayout() = default;
  explicit StateLayout(std::vector<StateComponent> components)
      : components_(std::move(components)) {}

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
