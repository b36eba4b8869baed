// TokenAutomaton: a compiled constraint over one vocabulary: the lazily determinized byte
// automaton (pda.h) plus the allowed-token mask of each of its configurations. A mask is computed
// once per configuration by walking the vocabulary trie (vocabulary.h) and cached (most steps of a
// JSON string or number revisit a configuration, so they cost a lookup). A bounded repetition (a
// maxLength string) visits a new configuration per character; its masks are split into the tokens
// of at most kCounterWindow bytes, shared by all positions with more than that left
// (Pda::Canonical), and the few longer tokens, walked per configuration. Shared by every matcher of
// the same constraint; thread-safe (one mutex: different constraints run in parallel). Memory:
// up to `max_cached_masks` masks of vocab/8 bytes (16 KB for V4) plus 1 KB per configuration.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/pda.h"
#include "structured/vocabulary.h"

namespace dsinfer::structured {

// One bit per token id: bit (id % 64) of word id / 64. [Vocabulary::mask_words()] uint64.
using TokenMask = std::vector<uint64_t>;

inline bool MaskHas(const uint64_t* mask, int64_t id) { return (mask[id >> 6] >> (id & 63)) & 1; }

class TokenAutomaton {
 public:
  TokenAutomaton(Grammar grammar, std::shared_ptr<const Vocabulary> vocab, PdaLimits limits = {},
                 size_t max_cached_masks = 1024);

  int32_t initial() const { return initial_; }
  // The configuration after `token`'s bytes, or Pda::kDead if the token is not allowed.
  // EOS leaves an accepting configuration unchanged and is dead elsewhere.
  int32_t AdvanceToken(int32_t config, int32_t token);
  // The configuration after `bytes` (for tests and the choice/regex checks), kDead if rejected.
  int32_t AdvanceBytes(int32_t config, std::string_view bytes);
  bool accepting(int32_t config);
  // Accepting and no byte may follow: the constraint is finished.
  bool completed(int32_t config);
  // The allowed tokens of `config` (EOS included iff accepting). Never null.
  std::shared_ptr<const TokenMask> Mask(int32_t config);
  // Not OK once the automaton hit a limit (the request is then ended with this error).
  Status status();

  const Vocabulary& vocab() const { return *vocab_; }
  struct Stats {
    int64_t mask_hits = 0;
    int64_t mask_misses = 0;
    int32_t configs = 0;
  };
  Stats stats();

 private:
  // Sets the bits of the tokens of `trie` (up to `max_depth` bytes) accepted from `config`.
  void Walk(const TokenTrie& trie, int32_t config, int32_t max_depth, uint64_t* bits);
  // Insert with first-in-first-out eviction.
  static void Remember(std::unordered_map<int32_t, std::shared_ptr<const TokenMask>>* cache,
                       std::deque<int32_t>* order, size_t cap, int32_t key,
                       std::shared_ptr<const TokenMask> mask);

  std::mutex mu_;
  Pda pda_;
  std::shared_ptr<const Vocabulary> vocab_;
  int32_t initial_;
  size_t max_cached_masks_;
  std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_;
  std::deque<int32_t> mask_order_;  // insertion order: the oldest mask goes first when full
  // Masks over the tokens of at most kCounterWindow bytes, by canonical configuration.
  std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> short_masks_;
  std::deque<int32_t> short_order_;
  std::vector<int32_t> walk_states_;  // [max_depth + 1] scratch of Walk()
  Stats stats_;
};

}  // namespace dsinfer::structured
