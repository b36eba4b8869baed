// Tokenizer: a Hugging Face `tokenizer.json` of the byte-level BPE family (DeepSeek V3/V4, GPT-2
// style) with ids identical to Hugging Face `tokenizers` (recipe-v4.md §4):
//   Encode(text, /*allow_special=*/true)  == HF encode(text, add_special_tokens=False): added-token
//                                            spellings in the text become their ids;
//   Encode(text, /*allow_special=*/false) == plain BPE, no added-token matching (prompt-injection
//                                            safe; what the recipe uses for user text);
//   Decode(ids)                           == HF decode(ids, skip_special_tokens=False).
// Immutable after Load(); all methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"

namespace dsinfer::tokenizer {

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a model dir that holds one.
  static StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  // From the JSON text of a tokenizer.json.
  static StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json_text);

  // Ids of `text`. Invalid UTF-8 is first repaired (one U+FFFD per maximal invalid subsequence),
  // which is what HF sees for such bytes; callers that must reject it check IsValidUtf8 first.
  std::vector<int32_t> Encode(std::string_view text, bool allow_special) const;
  // Appends to `out` (no allocation of a result vector).
  void EncodeTo(std::string_view text, bool allow_special, std::vector<int32_t>* out) const;

  // UTF-8 text of `ids` (lossy: invalid byte sequences become U+FFFD). Unknown ids are skipped,
  // as in HF; `skip_special` drops added tokens flagged special.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The raw bytes id `id` stands for (may be part of a UTF-8 character); "" for unknown ids.
  const std::string& TokenBytes(int32_t id) const;

  // Id of an added token by its content ("<｜User｜>") or of a vocab entry by its byte-level
  // spelling ("Ġhello"), or nullopt.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  bool IsKnownId(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // One past the largest id (vocab or added).
  int32_t id_end() const { return static_cast<int32_t>(id_bytes_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return added_; }

 private:
  Tokenizer() = default;
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* out) const;

  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher matcher_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::vector<std::string> id_bytes_;  // decoded bytes of every id
  std::vector<uint8_t> id_flags_;      // kKnown | kSpecial
};

}  // namespace dsinfer::tokenizer
