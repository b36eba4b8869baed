#include "cache/state_layout.h"

#include <map>
#include <tuple>

namespace dsinfer::cache {

const char* StateKindName(StateKind kind) {
  switch (kind) {
    case StateKind::kWindow: return "window";
    case StateKind::kCompressor: return "compressor";
    case StateKind::kCompressed: return "compressed";
    case StateKind::kIndexKeys: return "index_keys";
  }
  return "?";
}

StateLayout StateLayout::ForDeepseekV4(const io::DeepseekV4Config& c, int rollback_slack) {
  constexpr int64_t kFloat = sizeof(float);
  // (kind, ring_rows, tokens_per_row) -> bytes per row, mirroring SequenceState's constructor.
  std::map<std::tuple<StateKind, int64_t, int64_t>, int64_t> groups;
  for (int i = 0; i <= c.num_layers; ++i) {
    groups[{StateKind::kWindow, c.sliding_window - 1 + rollback_slack, 1}] += c.head_dim * kFloat;
    const int64_t rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
    if (rate == 0) continue;
    const bool csa = rate == c.csa_rate;
    const int64_t rows = (csa ? 2 * rate : rate) + rollback_slack;
    const int64_t width = csa ? 2 * c.head_dim : c.head_dim;
    groups[{StateKind::kCompressor, rows, 1}] += 2 * width * kFloat;
    groups[{StateKind::kCompressed, 0, rate}] += c.head_dim * kFloat;
    if (csa) {
      groups[{StateKind::kCompressor, rows, 1}] += 2 * 2 * c.index_head_dim * kFloat;
      groups[{StateKind::kIndexKeys, 0, rate}] += c.index_head_dim * kFloat;
    }
  }
  StateLayout layout;
  for (const auto& [key, bytes] : groups) {
    const auto& [kind, ring_rows, tokens_per_row] = key;
    StateComponent comp;
    comp.kind = kind;
    comp.bytes_per_row = bytes;
    comp.ring_rows = ring_rows;
    comp.tokens_per_row = tokens_per_row;
    comp.name = std::string(StateKindName(kind)) +
                (ring_rows > 0 ? "/ring" + std::to_string(ring_rows)
                               : "/rate" + std::to_string(tokens_per_row));
    layout.components_.push_back(comp);
  }
  return layout;
}

int64_t StateLayout::ExactBytes(int64_t length) const {
  int64_t n = 0;
  for (const auto& comp : components_) n += comp.Rows(length) * comp.bytes_per_row;
  return n;
}

int64_t StateLayout::FixedBytes() const {
  int64_t n = 0;
  for (const auto& comp : components_) {
    if (comp.ring()) n += comp.ring_rows * comp.bytes_per_row;
  }
  return n;
}

double StateLayout::BytesPerToken() const {
  double n = 0;
  for (const auto& comp : components_) {
    if (!comp.ring()) n += static_cast<double>(comp.bytes_per_row) / comp.tokens_per_row;
  }
  return n;
}

}  // namespace dsinfer::cache
