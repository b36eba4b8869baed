// AddedTokenMatcher: trie construction and the leftmost-longest scan.
#include "tokenizer/added_tokens.h"

#include <cstring>

namespace dsinfer::tokenizer {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  nodes_.push_back(Node());
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (unsigned char b : t.content) {
      int32_t c = Child(node, b);
      if (c < 0) {
        Node n;
        n.byte = b;
        n.next_sibling = nodes_[static_cast<size_t>(node)].first_child;
        nodes_.push_back(n);
        c = static_cast<int32_t>(nodes_.size() - 1);
        nodes_[static_cast<size_t>(node)].first_child = c;
      }
      node = c;
    }
    // Several entries with one spelling: the first one listed wins.
    if (nodes_[static_cast<size_t>(node)].id < 0) nodes_[static_cast<size_t>(node)].id = t.id;
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t b) const {
  for (int32_t c = nodes_[static_cast<size_t>(node)].first_child; c >= 0;
       c = nodes_[static_cast<size_t>(c)].next_sibling) {
    if (nodes_[static_cast<size_t>(c)].byte == b) return c;
  }
  return -1;
}

AddedTokenMatcher::Match AddedTokenMatcher::FindNext(std::string_view text, size_t from) const {
  Match m;
  if (empty()) return m;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[p[i]]) continue;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = Child(node, p[j]);
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].id >= 0) {
        m.begin = i;
        m.end = j + 1;
        m.id = nodes_[static_cast<size_t>(node)].id;
      }
    }
    if (m.id >= 0) return m;
  }
  return m;
}

}  // namespace dsinfer::tokenizer
