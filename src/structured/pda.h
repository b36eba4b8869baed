// Pda: the grammar run as a pushdown automaton over bytes, determinized lazily. A parse is a set of
// stacks (the grammar may be ambiguous); each stack is a chain of frames (alternative, position),
// interned so that a stack is one node id and a set of stacks ("configuration") is one config id.
// Rules in tail position replace their caller's frame (tail calls), so right-recursive loops
// (strings, repetitions) come back to the same configuration and everything keyed by a config id
// (its byte transitions, its token mask: token_automaton.h) is computed once and reused.
// A local key (Local) is a configuration whose stacks end in a hole instead of their shared
// context: what a token does there until it reaches the hole holds in every context, so token
// classes computed once per key (token_automaton.h) serve every configuration with that key.
// Bounded: past `max_configs` configurations or `max_stacks` stacks in one configuration the
// automaton reports ResourceExhausted and every further transition is dead.
// Not thread-safe (TokenAutomaton serializes access).
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "structured/grammar.h"

namespace dsinfer::structured {

struct PdaLimits {
  int32_t max_configs = 1 << 16;
  int32_t max_stacks = 2048;  // stacks in one configuration
  int32_t max_nodes = 1 << 20;
};

class Pda {
 public:
  static constexpr int32_t kDead = 0;  // the configuration with no stack: nothing matches

  Pda(Grammar grammar, PdaLimits limits);

  int32_t initial() const { return initial_; }
  // The configuration after reading `b` in `config` (kDead if `b` is not allowed there).
  int32_t Next(int32_t config, uint8_t b) {
    const size_t slot = static_cast<size_t>(config) * 256 + b;
    const int32_t t = next_[slot];
    if (t >= 0) return t;
    return next_[slot] = Compute(config, b);
  }
  // The input read so far is a complete match.
  bool accepting(int32_t config) const { return configs_[config].accept; }
  // Some byte can still follow.
  bool can_continue(int32_t config) const { return !configs_[config].ready.empty(); }
  const ByteSet& first_bytes(int32_t config) const { return configs_[config].first; }
  int32_t num_configs() const { return static_cast<int32_t>(configs_.size()); }
  int32_t max_configs() const { return limits_.max_configs; }
  // Room for `configs` configurations, so that adding one never moves the transition table (a
  // copy of megabytes in the middle of a mask); the rows are written as configurations come.
  void Reserve(int32_t configs) {
    next_.reserve(static_cast<size_t>(configs) * 256);
    configs_.reserve(static_cast<size_t>(configs));
    config_hashes_.reserve(static_cast<size_t>(configs));
  }
  // A configuration that accepts the same tokens of at most kCounterWindow bytes as `config`:
  // counted-repetition frames with more than the window left are moved to the window's edge
  // (grammar.h), so the positions of a long bounded string share one such configuration.
  // `config` itself when nothing moves (or a limit was hit).
  int32_t Canonical(int32_t config);
  bool has_counters() const { return !g_.canon_alt.empty(); }
  // The local key of `config`: each stack with the parent of the stacks' deepest common node (the
  // frame they all return to, e.g. a string's closing quote) replaced by the hole, so the string
  // interiors of every property, array item and nesting depth share one key. `config` itself when
  // the stacks share no context (or a limit was hit). Memoized.
  int32_t Local(int32_t config);
  // The positions of a bounded string: a key whose stacks are inside the optional iterations
  // of one counted repetition (Grammar::chains): the repeated element's frames on the chain
  // frame (alts[r - 1], 1), all with the same r and on the same node `exit` (where the
  // repetition ends); or `exit` itself; or stacks not on `exit` ("others": parses that left the
  // repetition earlier, e.g. [a-z]{0,30}[a-z] after its last letter, or a label that may have
  // been the top-level domain). Its `canonical` key is the in-chain stacks with r = `top` (the
  // chain's length, at most `max_top`) and the exit, without the others: a configuration allows
  // the tokens that one of its stacks allows, so the others' tokens are added from their own
  // configuration (FamilyOthers), and the positions share `canonical` whatever the others are.
  // The canonical key holds the exit's frame alone, on the hole (`exit`), whatever the key's
  // frames past the exit (`key_exit`'s parents: e.g. which label of (\.label){0,3} this is, or
  // where the string ends), so every context of the repetition shares one walk; a token that
  // goes past the exit is checked from the context of its position (ExitContext).
  // A token does from the key's in-chain stacks and exit what it does from `canonical` as long as
  // it needs at most r iterations; when the element is prefix-free (an input splits into
  // iterations one way only), the iterations it needs are read off the configuration it reaches
  // from `canonical` (Need). The chain is the first, over the key's stacks, of their topmost
  // chain frames that forms such a key (inside a label of (\.label){0,3}: the label's repetition),
  // among chains of at least kMinFamilyLength iterations. canonical < 0: not such a key.
  // Memoized.
  struct FamilyKey {
    int32_t canonical = -1;
    int32_t r = 0;
    int32_t top = 0;
    int32_t exit = -1;      // the exit's frame on the hole (the canonical key's exit)
    int32_t key_exit = -1;  // the exit node in the key's own frames (-1 for Mandatory)
    int32_t chain = -1;
    int32_t exit_config = -1;  // `exit` alone: where a parse goes on after leaving the chain
    bool has_others = false;   // some stack of the key is not on `key_exit`
    // Mandatory (a position in e^min, see Mandatory): a parse may leave the repetition only
    // after this many iterations; the context is the closure of `context_node`.
    int32_t min_exit = 0;
    int32_t context_node = -1;
  };
  // Only chains of at least this many optional iterations form families: a family's walk costs
  // a few whole-trie walks (it reads the longest tokens the chain allows, and follows the parses
  // that leave it), so it pays where many positions share it, not for whitespace ({0,2}) or a
  // short list.
  static constexpr int32_t kMinFamilyLength = 8;
  FamilyKey Family(int32_t key, int32_t max_top);
  // A position in the mandatory part e^min of e{min,max} (Grammar::mandatory_chain) with m
  // iterations to complete before the repetition may end: every stack is the element's frames on
  // one node (rep, q) whose parent is `exit`. Its tokens are those of the chain's family
  // (canonical: the same frames on the chain's frame with `top` left, over `exit` on the hole,
  // shared with the optional part's positions) that stay inside with at most m + max - min
  // iterations, or leave after at least m (min_exit) and at most m + max - min; r is that bound,
  // at most top - 1 (and then top is the longest token's length + 1: no token needs more).
  // Its context (past `exit`) is the closure of exit's parent. canonical < 0: not such a
  // configuration. Memoized.
  FamilyKey Mandatory(int32_t config, int32_t max_top);
  // The stacks of `config`, whose key is a family `f`, that are not on its exit, as a
  // configuration (not accepting): kDead when there are none, -1 at a limit. Memoized.
  int32_t FamilyOthers(int32_t config, const FamilyKey& f);
  // The ready stacks of `config`, and the configuration of its i-th stack alone (not accepting;
  // kDead at a limit). A configuration allows the tokens that one of its stacks allows, so
  // FamilyOthers' mask is the union of its stacks' own: a stack that left a repetition (a
  // hostname's top-level domain beside its labels) is then one configuration, and one mask,
  // whichever iteration it left at, where the stacks together were one configuration per
  // iteration.
  int32_t num_stacks(int32_t config) const {
    return static_cast<int32_t>(configs_[config].ready.size());
  }
  int32_t StackConfig(int32_t config, int32_t i);
  // Where a parse of `config` (whose key or configuration gave family `f`) goes on once it has
  // read the exit's frame: the closure of the exit's parent in `config` (kDead at a limit).
  int32_t ExitContext(int32_t config, const FamilyKey& f);
  // The fewest iterations left at which the parse inside the repetition that reached `config`
  // from `f.canonical` exists: its stacks on `exit` (r >= Need: the token is read inside the
  // chain, or ends where the repetition may end). The parses that left the repetition earlier
  // (stacks no longer on `exit`) are not counted: they are followed from `exit_config`.
  // -1: no such parse; -2: not of the family's form (then the token is checked per
  // configuration).
  int32_t Need(const FamilyKey& f, int32_t config) const;
  bool HasReady(int32_t config, int32_t node) const {
    const auto& r = configs_[config].ready;
    return std::binary_search(r.begin(), r.end(), node);
  }
  bool has_chains() const { return !g_.chains.empty(); }
  // The configuration of `config`'s context alone (the stack that Local cut off, closed): where
  // a parse that reaches the hole of the local key goes on. kDead when Local(config) == config.
  int32_t Context(int32_t config);
  // The closure of `node` alone (memoized): a context configuration.
  int32_t ContextOf(int32_t node);
  // Some parse of `config` reached the hole: the input so far left the key's own frames.
  bool has_hole(int32_t config) const { return configs_[config].hole; }
  // Some parse of `config` is still inside the key's own frames (or complete).
  bool live_locally(int32_t config) const {
    const Config& c = configs_[config];
    return c.accept || c.ready.size() > (c.hole ? 1u : 0u);
  }
  const Status& status() const { return status_; }
  const Grammar& grammar() const { return g_; }

 private:
  struct Config {
    std::vector<int32_t> ready;  // sorted stack nodes whose top frame is at a byte set
    bool accept = false;
    ByteSet first;                    // union of the ready frames' byte sets
    bool hole = false;                // ready holds the hole node
    std::vector<uint8_t> byte_class;  // [256] once a transition was computed: see Compute
  };
  // Ids by hash, open addressing with linear probing; the caller compares the candidates.
  struct IdTable {
    std::vector<int32_t> slots = std::vector<int32_t>(1024, -1);
    size_t size = 0;
    template <typename Eq>
    int32_t Find(uint64_t hash, Eq eq) const {
      const size_t mask = slots.size() - 1;
      for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const int32_t id = slots[i];
        if (id < 0 || eq(id)) return id;
      }
    }
    // `hashes[id]`: the hash of every id already in the table (to grow it).
    void Insert(uint64_t hash, int32_t id, const std::vector<uint64_t>& hashes);
  };
  static uint64_t ConfigHash(const std::vector<int32_t>& ready, bool accept);

  static uint64_t Frame(int32_t alt, int32_t pos) {
    return static_cast<uint64_t>(static_cast<uint32_t>(alt)) << 32 | static_cast<uint32_t>(pos);
  }
  int32_t Intern(uint64_t frame, int32_t parent);
  // The stack after the element at the top frame of `node` is done.
  int32_t After(int32_t node);
  // The grammar element a stack node's frame is at.
  const Element& ElementAt(int32_t node) const {
    const uint64_t f = frames_[node];
    return g_.alts[static_cast<size_t>(f >> 32)][f & 0xffffffffu];
  }
  // Expands `work_` to the configuration it stands for and interns it.
  int32_t Close();
  // The id of `c` (ready sorted and unique), added if new; kDead past the limit.
  int32_t InternConfig(Config c);
  // `node` with its counted-repetition frames moved to the window's edge; -1 at a limit.
  int32_t CanonicalNode(int32_t node);
  // Whether chain `c`'s element is prefix-free (explored through its configurations, bounded).
  bool PrefixFree(int32_t c);
  // `key` as a position of chain `chain` with `left` iterations left, ending at node `exit` (see
  // Family); canonical < 0 when it is not one.
  FamilyKey FamilyOf(int32_t key, int32_t chain, int32_t left, int32_t exit, int32_t max_top);
  // The longest chain whose element is `chain`'s (Grammar::chains): a family's classes are
  // those of its element, whatever the chain's length (a position with r left allows what a
  // position of the longer chain with r left allows), so the bounded strings of a schema share
  // one walk (the chains of one element: every bounded JSON string of the schema).
  int32_t RepresentativeChain(int32_t chain);
  // The exit's frame alone on the hole; when it is the last element of its alternative and a
  // byte set, an alternative of that set alone, shared by every exit reading it (a bounded
  // string's closing quote, whichever string). -1 at a limit.
  int32_t CanonicalExit(int32_t exit);
  // The node of `config` that a node of its local key stands for (the key's hole replaced by the
  // context Local cut off); -1 at a limit.
  int32_t InConfig(int32_t config, int32_t key_node);
  // The lowest common ancestor of two stack nodes (their deepest shared frame).
  int32_t CommonNode(int32_t a, int32_t b) const;
  int32_t Compute(int32_t config, uint8_t b);
  // Bytes numbered by class: two bytes share one iff every ready stack of `config` accepts both
  // or neither.
  std::vector<uint8_t> ByteClasses(int32_t config) const;
  void Fail(const std::string& what);

  Grammar g_;
  PdaLimits limits_;
  // Node 0 is the empty stack (the parse is complete).
  std::vector<uint64_t> frames_;
  std::vector<int32_t> parents_;
  std::vector<int32_t> depths_;        // frames in the stack
  IdTable node_ids_;                   // by Mix(frame, parent)
  std::vector<uint64_t> node_hashes_;  // by node
  std::vector<Config> configs_;
  IdTable config_ids_;                              // by ConfigHash(ready, accept)
  std::vector<uint64_t> config_hashes_;             // by configuration
  std::vector<int32_t> next_;                       // [configs, 256]; -1: not computed
  std::unordered_map<int32_t, int32_t> canonical_;  // memo of Canonical()
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> local_;  // Local(): key, context node
  std::unordered_map<int32_t, int32_t> contexts_;     // context node -> its closed configuration
  std::unordered_map<int32_t, FamilyKey> family_;     // memo of Family()
  std::unordered_map<int32_t, int32_t> others_;       // memo of FamilyOthers()
  std::unordered_map<int32_t, FamilyKey> mandatory_;  // memo of Mandatory()
  std::vector<int8_t> prefix_free_;                   // by chain: -1 unknown, 0, 1
  std::vector<int32_t> representative_;               // by chain (RepresentativeChain)
  std::unordered_map<int32_t, int32_t> exit_alts_;    // byte-set id -> its alternative alone
  // The hole: a node (1) whose frame reads from the empty byte set, on top of the empty stack.
  int32_t hole_ = -1;
  int32_t initial_ = kDead;
  Status status_;
  // Scratch of Close().
  std::vector<int32_t> work_;
  std::vector<int32_t> seen_;
  std::vector<uint32_t> seen_mark_;
  uint32_t mark_ = 0;
};

}  // namespace dsinfer::structured
