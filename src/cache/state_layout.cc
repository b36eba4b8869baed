#include "cache/state_layout.h"

namespace dsinfer::cache {

const char* StateKindName(StateKind kind) {
  switch (kind) {
    case StateKind::kWindow:
      return "window";
    case StateKind::kCompressor:
      return "compressor";
    case StateKind::kCompressed:
      return "compressed";
    case StateKind::kIndexKeys:
      return "index_keys";
  }
  return "?";
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
