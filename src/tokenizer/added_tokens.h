// AddedTokenMatcher: finds added-token spellings (special and non-special) in text the way
// Hugging Face does before pre-tokenization: leftmost-longest, non-overlapping
// (recipe-v4.md §4.1). A byte trie with a first-byte filter, so text without a candidate byte
// (usually '<') is skipped quickly.
// Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
};

class AddedTokenMatcher {
 public:
  struct Match {
    size_t begin = 0;
    size_t end = 0;  // exclusive
    int32_t id = -1;
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // The leftmost-longest match starting at or after `from`; id == -1 if there is none.
  Match FindNext(std::string_view text, size_t from) const;

  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    uint8_t byte = 0;
    int32_t id = -1;  // token ending here
  };
  int32_t Child(int32_t node, uint8_t b) const;

  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace dsinfer::tokenizer
