// UTF-8 helpers shared by the tokenizer and the recipe: validation, lossy repair (one U+FFFD per
// maximal invalid subsequence, as Rust's from_utf8_lossy and Python's errors="replace"), and the
// "how many bytes form a complete prefix" question the incremental detokenizer asks.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsinfer::tokenizer {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[pos]; 0 if the bytes there are invalid;
// -k (k > 0) if s ends after k bytes of a sequence that is valid so far (it may complete later).
// For an invalid sequence, *invalid_len gets the length of its maximal invalid subpart (>= 1).
int Utf8SequenceLength(std::string_view s, size_t pos, size_t* invalid_len = nullptr);

// Byte offset of the first invalid byte, or npos if `s` is valid UTF-8 (an incomplete sequence at
// the end is invalid).
size_t FindInvalidUtf8(std::string_view s);

inline bool IsValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

// `s` with every maximal invalid subsequence replaced by U+FFFD.
std::string RepairUtf8(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (<= 0x10FFFF, not a surrogate).
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes the code point of the valid sequence at s[pos] of length `len`.
uint32_t DecodeUtf8At(std::string_view s, size_t pos, int len);

}  // namespace dsinfer::tokenizer
