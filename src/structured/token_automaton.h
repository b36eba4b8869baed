// TokenAutomaton: a compiled constraint over one vocabulary: the lazily determinized byte
// automaton (pda.h) plus the allowed-token mask of each of its configurations, cached (most steps
// of a JSON string or number revisit a configuration, so they cost a lookup).
// A configuration seen for the first time (a miss) avoids walking the 274k-node vocabulary trie
// where its tokens were classified before, for another configuration:
// * Local keys (Pda::Local: the stacks with their shared context cut off) shared by several
//   configurations (the interior of one kind of string at any property, array item or nesting
//   depth) get token classes from one walk: accepted (read inside the key's own frames, or ending
//   where a parse reached the context: allowed in every context), and the trie subtrees below the
//   points where a parse reached the context, by their first byte: the tokens there are allowed
//   where the configuration's context allows the rest of their bytes (KeyExitTokens: the
//   subtrees of the bytes the context allows, walked once per context), the rest rejected.
//   Precompute classifies the keys it meets at compile time; at a mask, the first configuration
//   of a key not classified yet walks the trie itself, the second classifies the key.
// * The positions of a bounded string (Pda::Family: a key per character left) share one walk
//   from the family's canonical key that records, per token, the iterations (characters) it
//   needs: a position with r left allows those needing at most r (a copy of a cumulative mask),
//   plus the tokens that go past the repetition's exit after at most r iterations: those that
//   end there (a cumulative mask) and those whose remaining bytes the position's context allows
//   (Pda::ExitContext; the trie subtrees past the exit by their first byte, checked once per
//   context: ExitTokens), plus the mask of the position's parses that left the repetition
//   before (Pda::FamilyOthers: e.g. a label that may have been the top-level domain), so the
//   family does not depend on them. The canonical key holds no context (the exit's frame alone,
//   on the hole) and is built on the longest chain of the repeated element
//   (Pda::RepresentativeChain), so one walk serves every bounded string of a schema, in every
//   context (the labels of a hostname, whichever label).
// * The positions of a repetition's mandatory part (Pda::Mandatory: minLength) use the family of
//   its optional part, the tokens that leave the repetition only past the mandatory iterations.
// * Other counted repetitions: tokens of at most kCounterWindow bytes use the classes of the key
//   with the counter moved to the window's edge (Pda::Canonical), longer ones are walked.
// Masks stay exact (tests: every mask of random walks equals advancing by every token). Shared
// by every matcher of the same constraint; thread-safe (one mutex: different constraints run in
// parallel). Memory: up to `max_cached_masks` masks and as many key classes, vocab/8 bytes each
// (16 KB for V4) plus a key's subtree lists (4 bytes a subtree), up to max_cached_masks / 16
// families of 34 such masks, 1 KB per configuration.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
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
  // AdvanceToken without waiting for another thread's use of the automaton (a mask being
  // computed, which may take milliseconds): nullopt while it is busy. With the next
  // configuration, whether it is completed().
  struct Step {
    int32_t config = Pda::kDead;
    bool completed = false;
  };
  std::optional<Step> TryAdvanceToken(int32_t config, int32_t token);
  // The configuration after `bytes` (for tests and the choice/regex checks), kDead if rejected.
  int32_t AdvanceBytes(int32_t config, std::string_view bytes);
  bool accepting(int32_t config);
  // Accepting and no byte may follow: the constraint is finished.
  bool completed(int32_t config);
  // The allowed tokens of `config` (EOS included iff accepting). Never null.
  std::shared_ptr<const TokenMask> Mask(int32_t config);
  // Not OK once the automaton hit a limit (the request is then ended with this error).
  Status status();
  // Runs `fn` holding the automaton as a mask computation does (tests: a slow mask).
  void RunExclusive(const std::function<void()>& fn);
  // Compile time: follows the configurations reachable from the initial one (breadth first, a
  // transition per byte class) and computes what their first masks would: the token classes of
  // each bounded-string family (a family's first mask is otherwise a walk of the whole
  // vocabulary: milliseconds) with the tokens past the exit that each context allows
  // (ExitTokens) and the masks of the stacks beside them (Pda::FamilyOthers, stack by stack);
  // the classes of each local key (or counted key's canonical key) with the tokens past its
  // frames that each context allows (KeyExitTokens); the mask of a configuration without a
  // context. A class (a local key; a family in one context, with a mandatory position's
  // iterations) is expanded from the first of its configurations met: the others only lead to
  // their context (Pda::Context: their transitions inside the class lead to the classes met from
  // the first one), so the pass visits each class and context, not every configuration
  // (address_book: 1,399 configurations exist after it, of 20,619 reachable). Until
  // `max_configs` configurations exist or `budget` has passed (then `complete` is false, as when
  // a key or mask was left out by the bounds below); then reserves room for four times the
  // configurations (Pda::Reserve).
  struct Precomputed {
    int32_t configs = 0;   // configurations met
    int32_t families = 0;  // families classified
    int32_t keys = 0;      // local keys classified
    int32_t masks = 0;     // masks of stacks beside a family's, of configurations without context
    int64_t bytes = 0;     // of the local keys' classes
    bool complete = false;
  };
  Precomputed Precompute(int32_t max_configs, std::chrono::microseconds budget);
  // At most this many keys classified (a walk from the key each: 10-300 us; 16 KB and the
  // subtree lists each: up to ~1 MB for a key reaching its context after a few characters), while
  // their classes hold less than kPrecomputedBytes, and masks made by Precompute.
  static constexpr int32_t kPrecomputedKeys = 768;
  static constexpr int64_t kPrecomputedBytes = int64_t{64} << 20;
  static constexpr int32_t kPrecomputedMasks = 64;

  const Vocabulary& vocab() const { return *vocab_; }
  struct Stats {
    int64_t mask_hits = 0;
    int64_t mask_misses = 0;
    // Walks of the whole vocabulary trie: for one configuration (a miss with no shared classes)
    // and to classify a key or a bounded string's family (once, shared).
    int64_t config_walks = 0;
    int64_t key_walks = 0;
    int64_t family_walks = 0;  // of key_walks: those of a bounded string's family
    int32_t configs = 0;
  };
  Stats stats();

 private:
  // Token classes of a local key (see the top of this file) over the tokens of one trie (up to
  // max_depth bytes).
  struct Classes {
    // Read inside the key's frames, or ending where a parse reached the hole: allowed in every
    // context.
    TokenMask accepted;
    // The trie nodes whose parent's bytes took a parse to the hole, by their byte (the first one
    // the context reads): the tokens below are allowed where the context allows the rest of
    // their bytes (KeyExitTokens: once per context). Empty: none.
    std::vector<std::vector<int32_t>> after;  // [256]
    int32_t max_depth = 0;
  };
  enum class Part { kAll, kShort };  // all tokens, those of <= kCounterWindow bytes
  // Token classes of a family of keys (Pda::Family: the positions of a bounded string), by the
  // iterations a token needs.
  struct FamilyClasses {
    static constexpr int32_t kBuckets = 16;
    // needs[r], r <= min(top, kBuckets): the tokens read inside the key's frames with r left.
    std::vector<TokenMask> needs;
    std::vector<std::pair<int32_t, int32_t>> more;  // (need, id), need > kBuckets, by need
    // Tokens whose parse that left the repetition reaches the context (past the exit's frame,
    // e.g. a string's closing quote), possible with `need` iterations left:
    // * at their last byte: allowed in every context. (need, id) by need, and cumulative masks
    //   of those with need <= r <= kBuckets (`ends[r]`; empty when there are none).
    std::vector<std::pair<int32_t, int32_t>> end_list;
    std::vector<TokenMask> ends;
    // * before their last byte: the tokens below trie node `node` (its byte is the first one
    //   read in the context) are allowed where the context allows the rest of their bytes
    //   (ExitTokens: once per context). By the node's byte, then need.
    struct Subtree {
      int32_t need;
      int32_t node;
      bool operator<(const Subtree& o) const { return need < o.need; }
    };
    std::vector<std::vector<Subtree>> after;  // [256] (empty: none)
    TokenTrie uncertain;  // checked from the configuration (the other ways to the context)
    // A parse that left the repetition was still inside the key's frames afterwards (its need
    // is the fewest iterations over such parses: no lower bound for Pda::Mandatory positions).
    bool left_live = false;
  };
  std::shared_ptr<const FamilyClasses> KeyFamilyClasses(const Pda::FamilyKey& f);
  // The tokens of `c.after` (family `canonical`) that configuration `context` allows, as
  // (need, id) sorted by need (cached per family and context).
  using ExitList = std::vector<std::pair<int32_t, int32_t>>;
  std::shared_ptr<const ExitList> ExitTokens(const FamilyClasses& c, int32_t canonical,
                                             int32_t context);
  // AdvanceToken under mu_.
  int32_t AdvanceTokenLocked(int32_t config, int32_t token);
  // Mask() under mu_; `counted`: a caller's request (in the stats), not a part of another mask.
  std::shared_ptr<const TokenMask> MaskOf(int32_t config, bool counted);
  // Sets the bits of the tokens of `trie` (up to `max_depth` bytes) accepted from `config`.
  void Walk(const TokenTrie& trie, int32_t config, int32_t max_depth, uint64_t* bits);
  // The classes of `key` over `part` (cached).
  std::shared_ptr<const Classes> KeyClasses(int32_t key, Part part);
  Classes Classify(const TokenTrie& trie, int32_t key, int32_t max_depth);
  // Adds the tokens of `c` (the classes of class id `id`: key * 4 + part) allowed from `config`
  // (which has that key) to `bits`.
  void AddClasses(const Classes& c, int64_t id, int32_t config, uint64_t* bits);
  // The tokens of `c.after` that configuration `context` allows (cached per class and context):
  // their ids, or a mask when there are more than a mask's bits / 32 of them (a context that
  // allows nearly everything: a mask is then smaller).
  struct KeyExit {
    std::vector<int32_t> ids;
    TokenMask mask;
  };
  std::shared_ptr<const KeyExit> KeyExitTokens(const Classes& c, int64_t id, int32_t context);
  // Insert with first-in-first-out eviction.
  template <typename K, typename V>
  static void Remember(std::unordered_map<K, V>* cache, std::deque<K>* order, size_t cap, K key,
                       V value) {
    if (cap == 0) return;
    if (cache->size() >= cap) {
      cache->erase(order->front());
      order->pop_front();
    }
    cache->emplace(key, std::move(value));
    order->push_back(key);
  }

  std::mutex mu_;
  Pda pda_;
  std::shared_ptr<const Vocabulary> vocab_;
  int32_t initial_;
  size_t max_cached_masks_;
  std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_;
  std::deque<int32_t> mask_order_;  // insertion order: the oldest mask goes first when full
  std::unordered_map<int64_t, std::shared_ptr<const Classes>> classes_;  // key * 4 + part
  std::deque<int64_t> classes_order_;
  std::unordered_map<int32_t, std::shared_ptr<const FamilyClasses>> families_;  // by canonical
  std::deque<int32_t> families_order_;
  std::unordered_map<int64_t, std::shared_ptr<const ExitList>>
      exit_tokens_;  // (canonical, context)
  std::deque<int64_t> exit_tokens_order_;
  std::unordered_map<int64_t, std::shared_ptr<const KeyExit>> key_exit_tokens_;  // (class, context)
  std::deque<int64_t> key_exit_tokens_order_;
  std::unordered_set<int32_t> seen_keys_;  // keys met once (classified when met again)
  std::vector<int32_t> walk_states_;       // [max_depth + 1] scratch of Walk() and Classify()
  std::vector<char> walk_touched_;         // [max_depth + 1] scratch of Classify()
  std::vector<int32_t> needs_;             // configuration -> Pda::Need + 2 (0: not known yet)
  Stats stats_;
};

}  // namespace dsinfer::structured
