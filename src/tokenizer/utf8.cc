// UTF-8 validation following Unicode's table 3-7 (well-formed byte sequences) and the
// "maximal subpart" replacement practice (Unicode §3.9, U+FFFD substitution).
#include "tokenizer/utf8.h"

namespace dsinfer::tokenizer {

int Utf8SequenceLength(std::string_view s, size_t pos, size_t* invalid_len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char b0 = p[pos];
  if (b0 < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    if (invalid_len) *invalid_len = 1;
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    if (pos + i >= n) return -i;  // valid so far, truncated
    const unsigned char b = p[pos + i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      if (invalid_len) *invalid_len = static_cast<size_t>(i);
      return 0;
    }
  }
  return len;
}

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const int len = Utf8SequenceLength(s, i);
    if (len <= 0) return i;
    i += static_cast<size_t>(len);
  }
  return std::string_view::npos;
}

std::string RepairUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = 0;
    const int len = Utf8SequenceLength(s, i, &bad);
    if (len > 0) {
      out.append(s.data() + i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else if (len < 0) {  // truncated at the end: the whole tail is one maximal subpart
      out.append(kReplacementChar);
      i = s.size();
    } else {
      out.append(kReplacementChar);
      i += bad;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t DecodeUtf8At(std::string_view s, size_t pos, int len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + pos);
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

}  // namespace dsinfer::tokenizer
