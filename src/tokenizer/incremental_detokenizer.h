// IncrementalDetokenizer: turns a stream of generated ids into UTF-8 text deltas that never end
// inside a character. Bytes of an incomplete sequence are held until it completes; a sequence
// that can never complete becomes U+FFFD exactly as a full Decode() would, so the concatenated
// deltas plus Finish() always equal Decode(all ids) (recipe-v4.md §4.6).
// One per request; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dsinfer::tokenizer {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Text that became complete with `id` (often "", e.g. for the first half of an emoji).
  std::string Add(int32_t id);
  std::string Add(const std::vector<int32_t>& ids);
  // Flushes held bytes (an unfinished sequence becomes U+FFFD). Call once at the end.
  std::string Finish();

  // Bytes held back, waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace dsinfer::tokenizer
