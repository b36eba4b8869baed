// The GPT-2 byte-level alphabet: every byte maps to one printable code point so that BPE vocab
// entries are strings. Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves; the other 68 bytes,
// in increasing order, map to U+0100 + n (0x20 -> U+0120 'Ġ', 0x0A -> U+010A 'Ċ').
// Immutable tables; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsinfer::tokenizer {

// Code point that stands for byte `b`.
uint32_t ByteToCodePoint(uint8_t b);

// Byte that code point `cp` stands for, or nullopt if `cp` is not in the alphabet.
std::optional<uint8_t> CodePointToByte(uint32_t cp);

// "Hello world" -> "HelloĠworld".
std::string BytesToByteLevel(std::string_view bytes);

// Inverse of BytesToByteLevel; nullopt if `s` is not valid UTF-8 or holds a character outside the
// alphabet (such a token decodes to its own UTF-8 instead, as Hugging Face's ByteLevel decoder does).
std::optional<std::string> ByteLevelToBytes(std::string_view s);

}  // namespace dsinfer::tokenizer
