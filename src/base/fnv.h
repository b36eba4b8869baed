// FNV-1a, 64-bit: a fixed hash of bytes (the random presets' per-tensor seeds, benchmarks'
// output fingerprints). Not for security.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsinfer {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// Continues hash h over n bytes at data (start from kFnv1aOffset).
inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace dsinfer
