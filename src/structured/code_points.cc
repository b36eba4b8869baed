#include "structured/code_points.h"

#include <algorithm>
#include <cstdio>

namespace dsinfer::structured {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

// Appends the byte-range sequences of [lo, hi] (all of one UTF-8 length) to `alts`: split until
// every byte position ranges independently (the classic UTF-8 range construction).
void SplitSameLength(GrammarBuilder& b, uint32_t lo, uint32_t hi, int n,
                     std::vector<std::vector<Element>>* alts) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(b, lo, lo | m, n, alts);
        SplitSameLength(b, (lo | m) + 1, hi, n, alts);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(b, lo, (hi & ~m) - 1, n, alts);
        SplitSameLength(b, hi & ~m, hi, n, alts);
        return;
      }
    }
  }
  const std::string a = EncodeUtf8(lo), z = EncodeUtf8(hi);
  std::vector<Element> seq;
  for (int k = 0; k < n; ++k) {
    seq.push_back(b.Bytes(ByteSet::Range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(z[k]))));
  }
  alts->push_back(std::move(seq));
}

void AddUtf8Range(GrammarBuilder& b, uint32_t lo, uint32_t hi,
                  std::vector<std::vector<Element>>* alts) {
  static const uint32_t kEnds[4] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (int n = 1; n <= 4 && lo <= hi; ++n) {
    const uint32_t end = std::min(hi, kEnds[n - 1]);
    if (lo <= end) {
      if (n == 1) {
        alts->push_back(
            {b.Bytes(ByteSet::Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(end)))});
      } else {
        SplitSameLength(b, lo, end, n, alts);
      }
      lo = end + 1;
    }
  }
}

}  // namespace

std::string EncodeUtf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

CodePointSet CodePointSet::All() {
  CodePointSet s;
  s.Add(0, kMaxCodePoint);
  return s;
}

void CodePointSet::Add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.push_back({lo, std::min(hi, kMaxCodePoint)});
  Normalize();
}

void CodePointSet::Add(const CodePointSet& o) {
  ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  Normalize();
}

void CodePointSet::Normalize() {
  std::vector<std::pair<uint32_t, uint32_t>> split;
  for (auto [lo, hi] : ranges_) {  // remove surrogates
    if (hi < kSurrogateLo || lo > kSurrogateHi) {
      split.push_back({lo, hi});
      continue;
    }
    if (lo < kSurrogateLo) split.push_back({lo, kSurrogateLo - 1});
    if (hi > kSurrogateHi) split.push_back({kSurrogateHi + 1, hi});
  }
  std::sort(split.begin(), split.end());
  ranges_.clear();
  for (auto r : split) {
    if (!ranges_.empty() && r.first <= ranges_.back().second + 1) {
      ranges_.back().second = std::max(ranges_.back().second, r.second);
    } else {
      ranges_.push_back(r);
    }
  }
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : ranges_) {
    if (lo > next) out.ranges_.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.push_back({next, kMaxCodePoint});
  out.Normalize();
  return out;
}

CodePointSet CodePointSet::Minus(const CodePointSet& o) const {
  CodePointSet c = o.Complement();  // intersection with the complement
  CodePointSet out;
  for (auto [a, b] : ranges_) {
    for (auto [c0, c1] : c.ranges_) {
      const uint32_t lo = std::max(a, c0), hi = std::min(b, c1);
      if (lo <= hi) out.ranges_.push_back({lo, hi});
    }
  }
  out.Normalize();
  return out;
}

bool CodePointSet::Has(uint32_t c) const {
  for (auto [lo, hi] : ranges_) {
    if (c >= lo && c <= hi) return true;
  }
  return false;
}

Element Utf8Element(GrammarBuilder& b, const CodePointSet& set) {
  std::vector<std::vector<Element>> alts;
  for (auto [lo, hi] : set.ranges()) AddUtf8Range(b, lo, hi, &alts);
  if (alts.empty()) return b.Choice({}, "nothing");
  return b.Choice(std::move(alts), "char");
}

Element JsonCharElement(GrammarBuilder& b, const CodePointSet& set, const CodePointSet& escaped) {
  CodePointSet special;
  special.Add(0, 0x1F);
  special.Add('"', '"');
  special.Add('\\', '\\');
  std::vector<std::vector<Element>> alts;
  const CodePointSet plain = set.Minus(special).Minus(escaped);
  for (auto [lo, hi] : escaped.ranges()) {
    for (uint32_t c = lo; c <= hi && c <= 0xFFFF; ++c) {
      if (!set.Has(c) || special.Has(c)) continue;
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      alts.push_back(b.LiteralSeq(buf));
    }
  }
  for (auto [lo, hi] : plain.ranges()) AddUtf8Range(b, lo, hi, &alts);
  for (auto [lo, hi] : set.ranges()) {
    for (uint32_t c = lo; c <= hi && c <= 0x5C; ++c) {
      if (!special.Has(c)) continue;
      std::string esc;
      switch (c) {
        case '"':
          esc = "\\\"";
          break;
        case '\\':
          esc = "\\\\";
          break;
        case '\b':
          esc = "\\b";
          break;
        case '\f':
          esc = "\\f";
          break;
        case '\n':
          esc = "\\n";
          break;
        case '\r':
          esc = "\\r";
          break;
        case '\t':
          esc = "\\t";
          break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          esc = buf;
        }
      }
      alts.push_back(b.LiteralSeq(esc));
    }
  }
  if (alts.empty()) return b.Choice({}, "nothing");
  return b.Choice(std::move(alts), "json_char");
}

}  // namespace dsinfer::structured
