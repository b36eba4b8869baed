// ByteSet: a set of byte values (256 bits), the terminal alphabet of every grammar in structured/.
// A plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <cstring>

namespace dsinfer::structured {

struct ByteSet {
  uint64_t words[4] = {0, 0, 0, 0};

  static ByteSet Of(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  void Add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  void Remove(uint8_t b) { words[b >> 6] &= ~(uint64_t{1} << (b & 63)); }
  bool Has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const {
    return std::memcmp(words, o.words, sizeof(words)) == 0;
  }
};

}  // namespace dsinfer::structured
