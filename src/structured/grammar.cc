#include "structured/grammar.h"

#include <algorithm>

namespace dsinfer::structured {

bool GrammarBuilder::Charge(int64_t n) {
  if (!status_.ok()) return false;
  if (n < 0 || elements_ + n > max_elements_) {
    status_ = InvalidArgument("the constraint is too large: it compiles to more than " +
                              std::to_string(max_elements_) + " grammar elements");
    return false;
  }
  elements_ += n;
  return true;
}

int32_t GrammarBuilder::NewRule(std::string name) {
  g_.rules.emplace_back();
  g_.names.push_back(std::move(name));
  return static_cast<int32_t>(g_.rules.size() - 1);
}

void GrammarBuilder::AddAlt(int32_t rule, std::vector<Element> seq) {
  if (!Charge(static_cast<int64_t>(seq.size()) + 1)) return;
  g_.alts.push_back(std::move(seq));
  g_.rules[rule].push_back(static_cast<int32_t>(g_.alts.size() - 1));
}

Element GrammarBuilder::Bytes(const ByteSet& set) {
  std::string key(reinterpret_cast<const char*>(set.words), sizeof(set.words));
  auto [it, inserted] = set_ids_.emplace(key, static_cast<int32_t>(g_.sets.size()));
  if (inserted) g_.sets.push_back(set);
  return {false, it->second};
}

std::vector<Element> GrammarBuilder::LiteralSeq(std::string_view bytes) {
  std::vector<Element> seq;
  seq.reserve(bytes.size());
  for (char c : bytes) seq.push_back(Byte(static_cast<uint8_t>(c)));
  return seq;
}

Element GrammarBuilder::Literal(std::string_view bytes) {
  return Seq(LiteralSeq(bytes), "literal");
}

Element GrammarBuilder::Seq(std::vector<Element> seq, const char* name) {
  if (seq.size() == 1) return seq[0];
  const int32_t r = NewRule(name);
  AddAlt(r, std::move(seq));
  return Ref(r);
}

Element GrammarBuilder::Choice(std::vector<std::vector<Element>> alts, const char* name) {
  // Alternatives of one byte set each are one byte set (a character class's ranges: [a-z0-9._-]
  // is one terminal, not five alternatives), so a repetition of it is a repetition of a byte set
  // (pda.h: Family) and its closures hold one stack instead of one per range.
  std::vector<std::vector<Element>> kept;
  size_t set_alt = alts.size();  // the index in `kept` of the merged byte set
  for (auto& a : alts) {
    if (a.size() != 1 || a[0].is_rule) {
      kept.push_back(std::move(a));
    } else if (set_alt == alts.size()) {
      set_alt = kept.size();
      kept.push_back(std::move(a));
    } else {
      ByteSet merged = g_.sets[kept[set_alt][0].index];
      merged |= g_.sets[a[0].index];
      kept[set_alt][0] = Bytes(merged);
    }
  }
  alts = std::move(kept);
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  const int32_t r = NewRule(name);
  for (auto& a : alts) AddAlt(r, std::move(a));
  return Ref(r);
}

Element GrammarBuilder::Epsilon() {
  const int32_t r = NewRule("empty");
  AddAlt(r, {});
  return Ref(r);
}

Element GrammarBuilder::Optional(Element e) {
  const int32_t r = NewRule("opt");
  AddAlt(r, {});
  AddAlt(r, {e});
  return Ref(r);
}

Element GrammarBuilder::Star(Element e) {
  // star ::= e star | ε  (right recursion: the matcher's tail calls keep its stack flat)
  const int32_t r = NewRule("star");
  AddAlt(r, {e, Ref(r)});
  AddAlt(r, {});
  return Ref(r);
}

Element GrammarBuilder::Repeat(Element e, int64_t min, int64_t max) {
  if (min < 0 || (max >= 0 && max < min)) {
    status_ = InvalidArgument("a repetition has bounds {" + std::to_string(min) + "," +
                              std::to_string(max) + "}");
    return Epsilon();
  }
  if (!Charge(min + (max < 0 ? 2 : 2 * (max - min)))) return Epsilon();
  std::vector<Element> seq(static_cast<size_t>(min), e);
  if (max < 0) {
    seq.push_back(Star(e));
  } else if (max > min) {
    // tail_r ::= ε | e tail_{r-1} (r iterations left), built from the last one backwards;
    // tail_0 is ε (a rule, so the last iteration keeps its frame too: Grammar::chains).
    Element tail = Epsilon();
    int32_t window_alt = -1;  // the alternative with kCounterWindow + 1 iterations left
    Grammar::Chain chain{e, {}};
    for (int64_t left = 1; left <= max - min && status_.ok(); ++left) {
      const int32_t r = NewRule("rep");
      AddAlt(r, {});
      AddAlt(r, {e, tail});
      const int32_t alt = static_cast<int32_t>(g_.alts.size()) - 1;
      if (left == kCounterWindow + 1) window_alt = alt;
      if (left > kCounterWindow + 1 && window_alt >= 0) MarkCounter(alt, e, window_alt, 0);
      chain.alts.push_back(alt);
      tail = Ref(r);
    }
    if (status_.ok()) {
      const int32_t id = static_cast<int32_t>(g_.chains.size());
      g_.chain_of.resize(g_.alts.size(), -1);
      g_.chain_left.resize(g_.alts.size(), 0);
      for (size_t i = 0; i < chain.alts.size(); ++i) {
        g_.chain_of[chain.alts[i]] = id;
        g_.chain_left[chain.alts[i]] = static_cast<int32_t>(i + 1);
      }
      g_.chains.push_back(std::move(chain));
    }
    seq.push_back(tail);
  }
  if (seq.empty()) return Epsilon();
  if (seq.size() == 1) return seq[0];
  const int32_t r = NewRule("rep");
  AddAlt(r, std::move(seq));
  if (min >= 1 && max > min && status_.ok()) {
    const int32_t alt = static_cast<int32_t>(g_.alts.size()) - 1;
    g_.mandatory_chain.resize(g_.alts.size(), -1);
    g_.mandatory_chain[alt] = static_cast<int32_t>(g_.chains.size()) - 1;
  }
  if (min > kCounterWindow + 1 && status_.ok()) {
    MarkCounter(static_cast<int32_t>(g_.alts.size()) - 1, e, -1, static_cast<int32_t>(min));
  }
  return Ref(r);
}

void GrammarBuilder::MarkCounter(int32_t alt, Element e, int32_t canon, int32_t prefix_min) {
  if (static_cast<int32_t>(g_.canon_alt.size()) <= alt) {
    g_.canon_alt.resize(static_cast<size_t>(alt) + 1, -1);
    g_.prefix_min.resize(static_cast<size_t>(alt) + 1, 0);
  }
  if (canon >= 0) g_.canon_alt[alt] = canon;
  if (prefix_min > 0) g_.prefix_min[alt] = prefix_min;
  counter_elems_.push_back({alt, e});
}

Element GrammarBuilder::OrderedOptionalList(const std::vector<Element>& items,
                                            const std::vector<bool>& required,
                                            const std::vector<Element>& sep, const char* name) {
  // rest[h]: items i.. given h = "one was written already" (then a separator comes first).
  Element next[2] = {Epsilon(), Epsilon()};
  for (size_t i = items.size(); i-- > 0;) {
    Element cur[2];
    for (int h = 0; h < 2; ++h) {
      const int32_t r = NewRule(name);
      std::vector<Element> with = h ? sep : std::vector<Element>{};
      with.push_back(items[i]);
      with.push_back(next[1]);
      AddAlt(r, std::move(with));
      if (!required[i]) AddAlt(r, {next[h]});
      cur[h] = Ref(r);
    }
    next[0] = cur[0];
    next[1] = cur[1];
  }
  return next[0];
}

Element GrammarBuilder::SeparatedList(Element e, std::vector<Element> sep, int64_t min,
                                      int64_t max) {
  std::vector<Element> more = sep;
  more.push_back(e);
  const Element tail = Repeat(Seq(std::move(more), "sep_item"), std::max<int64_t>(min - 1, 0),
                              max < 0 ? -1 : std::max<int64_t>(max - 1, 0));
  const Element list = Seq({e, tail}, "list");
  if (min == 0) return Optional(list);
  return list;
}

StatusOr<Grammar> GrammarBuilder::Finish(int32_t root) {
  DSINFER_RETURN_IF_ERROR(status_);
  g_.root = root;
  DSINFER_RETURN_IF_ERROR(CheckNoLeftRecursion(g_));
  // Shared masks need an element that reads a byte per iteration.
  const std::vector<char> nullable = NullableRules(g_);
  for (const auto& [alt, e] : counter_elems_) {
    if (e.is_rule && nullable[e.index]) {
      g_.canon_alt[alt] = -1;
      g_.prefix_min[alt] = 0;
    }
  }
  for (Grammar::Chain& c : g_.chains) {
    if (!c.e.is_rule || !nullable[c.e.index]) continue;
    for (int32_t alt : c.alts) g_.chain_of[alt] = -1;
    c.alts.clear();
    const int32_t id = static_cast<int32_t>(&c - g_.chains.data());
    for (int32_t& m : g_.mandatory_chain) m = m == id ? -1 : m;
  }
  return std::move(g_);
}

std::vector<char> NullableRules(const Grammar& g) {
  const size_t n = g.rules.size();
  std::vector<char> nullable(n, 0);  // fixpoint
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t a : g.rules[r]) {
        bool all = true;
        for (const Element& e : g.alts[a]) {
          if (!e.is_rule || !nullable[e.index]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Status CheckNoLeftRecursion(const Grammar& g) {
  const size_t n = g.rules.size();
  const std::vector<char> nullable = NullableRules(g);
  // Left-edge graph: r -> s when s can start r before a byte is read. A cycle of such edges grows
  // the stack forever unless every edge on it is a tail call (s last in its alternative: the
  // matcher replaces r's frame, and the closure's dedup ends the loop). So: an edge that is not a
  // tail call inside a strongly connected component is left recursion.
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t a : g.rules[r]) {
      const auto& seq = g.alts[a];
      for (size_t i = 0; i < seq.size(); ++i) {
        const Element& e = seq[i];
        if (!e.is_rule) break;
        edges[r].push_back({e.index, i + 1 == seq.size()});
        if (!nullable[e.index]) break;
      }
    }
  }
  // Tarjan's SCC, iterative.
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), stack;
  std::vector<char> on_stack(n, 0);
  std::vector<std::pair<int32_t, size_t>> call;
  int32_t counter = 0, comps = 0;
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    call.push_back({static_cast<int32_t>(start), 0});
    index[start] = low[start] = counter++;
    stack.push_back(static_cast<int32_t>(start));
    on_stack[start] = 1;
    while (!call.empty()) {
      auto& [v, next] = call.back();
      if (next < edges[v].size()) {
        const int32_t w = edges[v][next++].to;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = comps;
        } while (w != v);
        ++comps;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && comp[e.to] == comp[r]) {
        return InvalidArgument("grammar rule '" + g.names[e.to] +
                               "' is left-recursive (it can reach itself before reading a byte); "
                               "write the repetition on the right or with * / +");
      }
    }
  }
  return Status::Ok();
}

}  // namespace dsinfer::structured
