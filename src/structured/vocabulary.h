// Vocabulary: the bytes of every token id as a byte trie, in preorder, for mask computation
// (token_automaton.h): walking the trie against a byte automaton visits each shared prefix once
// and skips a whole subtree at the first byte the automaton rejects. Special and added tokens are
// not in the trie (a constraint never allows them), except the few a grammar may name
// (kGrammarSpecialTokens: the DSML token of tool calls): inside this module each is spelled by one
// byte that UTF-8 never uses (SpecialTokenByte), so a grammar allows the token exactly where it
// allows that byte. Ordinary tokens holding such a byte (never valid UTF-8, which every text
// constraint requires anyway) are left out. EOS is allowed separately, only where the constraint
// accepts. Immutable after Create(); thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::structured {

// The special tokens a grammar may name, by slot: slot i is spelled by byte SpecialTokenByte(i).
inline constexpr std::string_view kGrammarSpecialTokens[] = {
    "\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C"};
constexpr int kNumGrammarSpecialTokens =
    static_cast<int>(sizeof(kGrammarSpecialTokens) / sizeof(kGrammarSpecialTokens[0]));
constexpr int kDsmlSlot = 0;  // "｜DSML｜" (V4: id 128825), the markup of DSML tool calls
// Bytes 0xF8..0xFF never occur in UTF-8; 0xFF - slot stands for a special token.
constexpr uint8_t SpecialTokenByte(int slot) { return static_cast<uint8_t>(0xFF - slot); }
constexpr uint8_t kFirstSpecialTokenByte = 0xF8;

// A byte trie of token spellings in preorder; node 0 is the root (the empty prefix).
class TokenTrie {
 public:
  TokenTrie() = default;
  // The tokens `ids` of `bytes` (each non-empty).
  TokenTrie(const std::vector<std::string>& bytes, std::vector<int32_t> ids);

  // A node's fields together (a walk reads them all for every node it visits: one cache line
  // per four nodes, in preorder).
  struct Node {
    uint8_t byte = 0;
    uint16_t depth = 0;
    int32_t end = 1;        // one past the last node below this one
    int32_t tok_begin = 0;  // the tokens spelled exactly by the path here:
    int32_t tok_end = 0;    // token_ids()[tok_begin .. tok_end)
  };
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  const Node* nodes() const { return nodes_.data(); }
  uint8_t node_byte(int32_t n) const { return nodes_[n].byte; }
  uint16_t node_depth(int32_t n) const { return nodes_[n].depth; }
  int32_t subtree_end(int32_t n) const { return nodes_[n].end; }
  // Tokens spelled exactly by the path to n: token_ids()[token_begin(n) .. token_begin(n + 1)).
  int32_t token_begin(int32_t n) const {
    return n < num_nodes() ? nodes_[n].tok_begin : static_cast<int32_t>(tok_ids_.size());
  }
  const std::vector<int32_t>& token_ids() const { return tok_ids_; }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_ = {Node{}};
  std::vector<int32_t> tok_ids_;
  int32_t max_depth_ = 0;
};

class Vocabulary {
 public:
  // `token_bytes[id]`: the bytes of id ("": never allowed). `vocab_size` >= token_bytes.size() is
  // the mask width (the model's vocabulary may be padded past the tokenizer's ids).
  // `special_ids[slot]`: the id of kGrammarSpecialTokens[slot] (-1 or absent: none).
  static std::shared_ptr<const Vocabulary> Create(const std::vector<std::string>& token_bytes,
                                                  int64_t vocab_size, int32_t eos_id,
                                                  std::vector<int32_t> special_ids = {});
  // Every ordinary (non-added) token of `tokenizer`, and its kGrammarSpecialTokens.
  static std::shared_ptr<const Vocabulary> FromTokenizer(const tokenizer::Tokenizer& tokenizer,
                                                         int64_t vocab_size, int32_t eos_id);

  int64_t size() const { return vocab_size_; }
  int64_t mask_words() const { return (vocab_size_ + 63) / 64; }
  int32_t eos_id() const { return eos_id_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<std::string>& all_bytes() const { return bytes_; }
  int64_t num_ids() const { return static_cast<int64_t>(bytes_.size()); }
  // The id of the special token of `slot`, or -1 when this vocabulary has none.
  int32_t special_id(int slot) const {
    return slot < static_cast<int>(special_ids_.size()) ? special_ids_[slot] : -1;
  }

  // Every token, and the tokens longer than kCounterWindow bytes alone (grammar.h: masks of
  // counted repetitions are shared up to that length; the long tokens are walked per state).
  const TokenTrie& trie() const { return trie_; }
  const TokenTrie& long_trie() const { return long_trie_; }

 private:
  std::vector<std::string> bytes_;
  int64_t vocab_size_ = 0;
  int32_t eos_id_ = -1;
  std::vector<int32_t> special_ids_;  // by slot
  TokenTrie trie_;
  TokenTrie long_trie_;
};

}  // namespace dsinfer::structured
