// GPT-2 byte-level alphabet tables (built once, constexpr-style, at first use).
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace dsinfer::tokenizer {

namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 512> cp_to_byte{};  // all alphabet code points are < 0x144
};

bool MapsToItself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.cp_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = MapsToItself(b) ? static_cast<uint32_t>(b) : 0x100u + n++;
      t.byte_to_cp[b] = cp;
      t.cp_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t b) { return GetTables().byte_to_cp[b]; }

std::optional<uint8_t> CodePointToByte(uint32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int16_t b = GetTables().cp_to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) AppendUtf8(ByteToCodePoint(b), &out);
  return out;
}

std::optional<std::string> ByteLevelToBytes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int len = Utf8SequenceLength(s, i);
    if (len <= 0) return std::nullopt;
    const auto b = CodePointToByte(DecodeUtf8At(s, i, len));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += static_cast<size_t>(len);
  }
  return out;
}

}  // namespace dsinfer::tokenizer
