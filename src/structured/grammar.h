// Grammar: the one form every constraint compiles to (JSON schema, regex, choice, GBNF): a
// context-free grammar over bytes whose terminals are byte sets. A rule has alternatives; an
// alternative is a sequence of elements, each a byte set or a rule. Left recursion is rejected
// (the matcher expands rules top-down, pda.h), right recursion is how loops are written.
// GrammarBuilder builds one under a size limit (an explosive constraint is an InvalidArgument, not
// an out-of-memory). Grammar is immutable once built; the builder is not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "structured/byte_set.h"

namespace dsinfer::structured {

// Counted repetitions e{min,max} (GrammarBuilder::Repeat) are chains of alternatives, one per
// count. For any token of at most kCounterWindow bytes, two positions of one chain with more than
// kCounterWindow mandatory (or optional) iterations left behave alike, when e reads at least one
// byte: the matcher shares their token masks (pda.h: Canonical).
constexpr int kCounterWindow = 16;

struct Element {
  bool is_rule = false;
  int32_t index = 0;  // rule id (is_rule) or byte-set id
};

struct Grammar {
  std::vector<ByteSet> sets;                // byte-set id -> set
  std::vector<std::vector<Element>> alts;   // alternative id -> sequence (may be empty: epsilon)
  std::vector<std::vector<int32_t>> rules;  // rule id -> alternative ids
  std::vector<std::string> names;           // rule id -> name (for errors)
  int32_t root = -1;
  // Counted repetitions (see kCounterWindow), indexed by alternative id (shorter vectors: none):
  // canon_alt[a] >= 0: a is an optional iteration with more than kCounterWindow + 1 left, which
  // behaves like canon_alt[a] (the one with kCounterWindow + 1 left); prefix_min[a] > 0: a is the
  // mandatory part e^min (then the tail), whose positions p < min - kCounterWindow - 1 behave
  // like min - kCounterWindow - 1.
  std::vector<int32_t> canon_alt;
  std::vector<int32_t> prefix_min;
  // The optional iterations of each counted repetition e{min,max} (max > min), as a chain:
  // alts[r - 1] is the alternative [e, tail] of the rule with r iterations left (r = 1..max-min;
  // its tail allows r - 1 more), so a stack inside an optional iteration holds the frame
  // (alts[r - 1], 1). Matchers use it to share token classes between the positions of a bounded
  // string (pda.h: Family). Only chains whose e reads at least one byte.
  struct Chain {
    Element e;
    std::vector<int32_t> alts;
  };
  std::vector<Chain> chains;
  std::vector<int32_t> chain_of;    // alternative id -> chain id, or -1 (shorter vector: -1)
  std::vector<int32_t> chain_left;  // alternative id -> r, its iterations left
  // The mandatory part of e{min,max} (1 <= min < max): the alternative [e x min, tail_{max-min}]
  // -> the chain of its tail, or -1 (shorter vector: -1). Its positions share the chain's token
  // classes (pda.h: Mandatory).
  std::vector<int32_t> mandatory_chain;
};

class GrammarBuilder {
 public:
  // `max_elements`: the most elements (over all alternatives) the grammar may hold.
  explicit GrammarBuilder(int64_t max_elements = 1 << 20) : max_elements_(max_elements) {}

  int32_t NewRule(std::string name);
  void AddAlt(int32_t rule, std::vector<Element> seq);

  Element Bytes(const ByteSet& set);
  Element Byte(uint8_t b) { return Bytes(ByteSet::Of(b)); }
  static Element Ref(int32_t rule) { return {true, rule}; }

  // Helpers; each returns an element standing for the new language.
  std::vector<Element> LiteralSeq(std::string_view bytes);
  Element Literal(std::string_view bytes);
  Element Seq(std::vector<Element> seq, const char* name = "seq");
  Element Choice(std::vector<std::vector<Element>> alts, const char* name = "choice");
  Element Optional(Element e);
  Element Star(Element e);
  // e{min,max}; max < 0: unbounded.
  Element Repeat(Element e, int64_t min, int64_t max);
  // "e (sep e){min-1,max-1}" when min >= 1; with min == 0 the whole list is optional.
  Element SeparatedList(Element e, std::vector<Element> sep, int64_t min, int64_t max);
  // The empty language's complement of nothing: a rule with one empty alternative.
  Element Epsilon();
  // items[0..n) in this order, each present (items[i] required: always), `sep` between two that
  // are present: an object's properties, a tool call's parameters. Rules are named `name`.
  Element OrderedOptionalList(const std::vector<Element>& items, const std::vector<bool>& required,
                              const std::vector<Element>& sep, const char* name);

  // Not OK once a limit was hit (further calls are cheap no-ops on a poisoned builder).
  const Status& status() const { return status_; }
  // Checks left recursion and returns the grammar rooted at `root`.
  StatusOr<Grammar> Finish(int32_t root);

 private:
  bool Charge(int64_t n);

  // The repeated element of each counted chain alternative (checked non-nullable at Finish).
  void MarkCounter(int32_t alt, Element e, int32_t canon, int32_t prefix_min);

  Grammar g_;
  std::vector<std::pair<int32_t, Element>> counter_elems_;
  std::unordered_map<std::string, int32_t> set_ids_;
  int64_t elements_ = 0;
  int64_t max_elements_;
  Status status_;
};

// Per rule: whether it can match the empty string.
std::vector<char> NullableRules(const Grammar& g);
// InvalidArgument naming a rule that can call itself without consuming a byte, or OK.
Status CheckNoLeftRecursion(const Grammar& g);

}  // namespace dsinfer::structured
