// Sets of Unicode code points (character classes) and their byte-level forms: a set as the UTF-8
// byte sequences of its members (for raw text), or as the JSON-string encoding of its members
// (for string contents: '"', '\' and control characters become their escapes, one canonical
// escape each). Surrogates (U+D800-DFFF) are never members. Pure functions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace dsinfer::structured {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet All();  // every scalar value
  static CodePointSet Of(uint32_t c) {
    CodePointSet s;
    s.Add(c, c);
    return s;
  }
  void Add(uint32_t lo, uint32_t hi);  // inclusive
  void Add(const CodePointSet& o);
  CodePointSet Complement() const;  // within the scalar values
  CodePointSet Minus(const CodePointSet& o) const;
  bool empty() const { return ranges_.empty(); }
  bool Has(uint32_t c) const;
  // Sorted, disjoint, non-adjacent, surrogates removed.
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void Normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// One member of `set` as UTF-8 bytes.
Element Utf8Element(GrammarBuilder& b, const CodePointSet& set);
// One member of `set` as it appears inside a JSON string literal. Members of `escaped` (code points
// of the Basic Multilingual Plane) are written only as their \uxxxx escape, never raw.
Element JsonCharElement(GrammarBuilder& b, const CodePointSet& set,
                        const CodePointSet& escaped = CodePointSet());
// The UTF-8 bytes of `c`.
std::string EncodeUtf8(uint32_t c);

}  // namespace dsinfer::structured
