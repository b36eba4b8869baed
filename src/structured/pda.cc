#include "structured/pda.h"

#include <algorithm>

#include "base/check.h"

namespace dsinfer::structured {

namespace {

uint64_t Mix(uint64_t frame, int32_t parent) {
  uint64_t k = frame * 0x9e3779b97f4a7c15ull ^ static_cast<uint32_t>(parent);
  k ^= k >> 31;
  k *= 0xbf58476d1ce4e5b9ull;
  return k ^ (k >> 29);
}

}  // namespace

uint64_t Pda::ConfigHash(const std::vector<int32_t>& ready, bool accept) {
  uint64_t h = accept ? 0x9e3779b97f4a7c15ull : 0xcbf29ce484222325ull;
  for (int32_t x : ready) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
  return Mix(h, static_cast<int32_t>(ready.size()));
}

void Pda::IdTable::Insert(uint64_t hash, int32_t id, const std::vector<uint64_t>& hashes) {
  if ((size + 1) * 2 > slots.size()) {
    std::vector<int32_t> old = std::move(slots);
    slots.assign(old.size() * 2, -1);
    const size_t mask = slots.size() - 1;
    for (int32_t o : old) {
      if (o < 0) continue;
      size_t i = hashes[o] & mask;
      while (slots[i] >= 0) i = (i + 1) & mask;
      slots[i] = o;
    }
  }
  const size_t mask = slots.size() - 1;
  size_t i = hash & mask;
  while (slots[i] >= 0) i = (i + 1) & mask;
  slots[i] = id;
  ++size;
}

Pda::Pda(Grammar grammar, PdaLimits limits) : g_(std::move(grammar)), limits_(limits) {
  frames_.push_back(0);
  parents_.push_back(-1);
  depths_.push_back(0);
  node_hashes_.push_back(0);
  seen_mark_.push_back(0);
  configs_.push_back({});  // kDead: no stack, not accepting
  config_hashes_.push_back(ConfigHash({}, false));
  config_ids_.Insert(config_hashes_[kDead], kDead, config_hashes_);
  next_.assign(256, kDead);
  DSINFER_CHECK(g_.root >= 0);
  // The hole's frame: an alternative no rule uses, reading from the empty set (so a parse that
  // reaches the hole stops there, and the configuration records that it did).
  g_.sets.push_back(ByteSet{});
  g_.alts.push_back({Element{false, static_cast<int32_t>(g_.sets.size() - 1)}});
  hole_ = Intern(Frame(static_cast<int32_t>(g_.alts.size() - 1), 0), 0);
  DSINFER_CHECK(hole_ == 1);
  work_.clear();
  for (int32_t a : g_.rules[g_.root]) {
    work_.push_back(g_.alts[a].empty() ? 0 : Intern(Frame(a, 0), 0));
  }
  initial_ = Close();
}

void Pda::Fail(const std::string& what) {
  if (status_.ok()) status_ = ResourceExhausted("the constraint is too complex to match: " + what);
}

int32_t Pda::Intern(uint64_t frame, int32_t parent) {
  const uint64_t hash = Mix(frame, parent);
  const int32_t found = node_ids_.Find(hash, [&](int32_t n) {
    return node_hashes_[n] == hash && frames_[n] == frame && parents_[n] == parent;
  });
  if (found >= 0) return found;
  if (static_cast<int32_t>(frames_.size()) >= limits_.max_nodes) {
    Fail("more than " + std::to_string(limits_.max_nodes) + " parser stack frames");
    return -1;
  }
  const int32_t id = static_cast<int32_t>(frames_.size());
  frames_.push_back(frame);
  parents_.push_back(parent);
  depths_.push_back(depths_[parent] + 1);
  node_hashes_.push_back(hash);
  seen_mark_.push_back(0);
  node_ids_.Insert(hash, id, node_hashes_);
  return id;
}

int32_t Pda::After(int32_t node) {
  const uint64_t f = frames_[node];
  const int32_t alt = static_cast<int32_t>(f >> 32);
  const int32_t pos = static_cast<int32_t>(f & 0xffffffffu);
  if (pos + 1 < static_cast<int32_t>(g_.alts[alt].size()))
    return Intern(Frame(alt, pos + 1), parents_[node]);
  return parents_[node];  // tail: the caller continues where it would after this rule
}

int32_t Pda::Close() {
  Config c;
  if (++mark_ == 0) {
    std::fill(seen_mark_.begin(), seen_mark_.end(), 0);
    mark_ = 1;
  }
  int64_t budget = int64_t{limits_.max_stacks} * 64;
  while (!work_.empty()) {
    const int32_t m = work_.back();
    work_.pop_back();
    if (m < 0) return kDead;  // a limit was hit (status_ says which)
    if (seen_mark_[m] == mark_) continue;
    seen_mark_[m] = mark_;
    if (--budget < 0) {
      Fail("a grammar expansion visits more than " +
           std::to_string(int64_t{limits_.max_stacks} * 64) + " parser states");
      return kDead;
    }
    if (m == 0) {
      c.accept = true;
      continue;
    }
    const uint64_t f = frames_[m];
    const auto& seq = g_.alts[static_cast<size_t>(f >> 32)];
    const Element e = seq[f & 0xffffffffu];
    if (!e.is_rule) {
      c.ready.push_back(m);
      c.first |= g_.sets[e.index];
      continue;
    }
    const int32_t k = After(m);
    if (k < 0) return kDead;
    for (int32_t a : g_.rules[e.index]) {
      work_.push_back(g_.alts[a].empty() ? k : Intern(Frame(a, 0), k));
    }
  }
  if (static_cast<int32_t>(c.ready.size()) > limits_.max_stacks) {
    Fail("more than " + std::to_string(limits_.max_stacks) + " parses are alive at once");
    return kDead;
  }
  std::sort(c.ready.begin(), c.ready.end());
  return InternConfig(std::move(c));
}

int32_t Pda::InternConfig(Config c) {
  c.hole = !c.ready.empty() && c.ready[0] == hole_;  // sorted: the hole (1) comes first
  const uint64_t hash = ConfigHash(c.ready, c.accept);
  const int32_t found = config_ids_.Find(hash, [&](int32_t id) {
    return config_hashes_[id] == hash && configs_[id].accept == c.accept &&
           configs_[id].ready == c.ready;
  });
  if (found >= 0) return found;
  if (static_cast<int32_t>(configs_.size()) >= limits_.max_configs) {
    Fail("more than " + std::to_string(limits_.max_configs) + " matcher states");
    return kDead;
  }
  const int32_t id = static_cast<int32_t>(configs_.size());
  configs_.push_back(std::move(c));
  config_hashes_.push_back(hash);
  config_ids_.Insert(hash, id, config_hashes_);
  next_.resize(next_.size() + 256, -1);
  return id;
}

int32_t Pda::CanonicalNode(int32_t node) {
  std::vector<int32_t> chain;
  for (int32_t n = node; n != 0; n = parents_[n]) chain.push_back(n);
  int32_t parent = 0;
  bool moved = false;
  for (size_t i = chain.size(); i-- > 0;) {
    const int32_t n = chain[i];
    const int32_t alt = static_cast<int32_t>(frames_[n] >> 32);
    const int32_t pos = static_cast<int32_t>(frames_[n] & 0xffffffffu);
    int32_t alt2 = alt, pos2 = pos;
    if (alt < static_cast<int32_t>(g_.canon_alt.size())) {
      if (g_.canon_alt[alt] >= 0) alt2 = g_.canon_alt[alt];
      const int32_t edge = g_.prefix_min[alt] - kCounterWindow - 1;
      if (g_.prefix_min[alt] > 0 && pos < edge) pos2 = edge;
    }
    if (!moved && alt2 == alt && pos2 == pos) {
      parent = n;  // unchanged so far: the original node
      continue;
    }
    moved = true;
    parent = Intern(Frame(alt2, pos2), parent);
    if (parent < 0) return -1;
  }
  return parent;
}

int32_t Pda::Canonical(int32_t config) {
  if (!has_counters() || config == kDead) return config;
  auto it = canonical_.find(config);
  if (it != canonical_.end()) return it->second;
  Config c;
  c.accept = configs_[config].accept;
  bool moved = false;
  for (int32_t m : configs_[config].ready) {
    const int32_t n = CanonicalNode(m);
    if (n < 0) return config;
    moved |= n != m;
    c.ready.push_back(n);
  }
  int32_t id = config;
  if (moved) {
    std::sort(c.ready.begin(), c.ready.end());
    c.ready.erase(std::unique(c.ready.begin(), c.ready.end()), c.ready.end());
    for (int32_t m : c.ready) c.first |= g_.sets[ElementAt(m).index];
    id = InternConfig(std::move(c));
    if (id == kDead) id = config;
  }
  canonical_[config] = id;
  return id;
}

int32_t Pda::CommonNode(int32_t a, int32_t b) const {
  while (depths_[a] > depths_[b]) a = parents_[a];
  while (depths_[b] > depths_[a]) b = parents_[b];
  while (a != b) {
    a = parents_[a];
    b = parents_[b];
  }
  return a;
}

int32_t Pda::Local(int32_t config) {
  if (config == kDead || configs_[config].ready.empty() || configs_[config].hole) return config;
  auto it = local_.find(config);
  if (it != local_.end()) return it->second.first;
  const std::vector<int32_t>& ready = configs_[config].ready;
  int32_t common = ready[0];
  for (size_t i = 1; i < ready.size() && common != 0; ++i) common = CommonNode(common, ready[i]);
  // The context is below the common node: its own frame stays in the key (a string's closing
  // quote is one of the stacks; cutting at it would make every token reach the hole at once).
  const int32_t context = common == 0 ? 0 : parents_[common];
  int32_t id = config;
  if (context != 0) {
    Config c;
    c.first = configs_[config].first;
    std::vector<int32_t> chain;
    for (int32_t m : ready) {
      chain.clear();
      for (int32_t n = m; n != context; n = parents_[n]) chain.push_back(n);
      int32_t node = hole_;
      for (size_t i = chain.size(); i-- > 0 && node >= 0;) node = Intern(frames_[chain[i]], node);
      if (node < 0) break;
      c.ready.push_back(node);
    }
    if (c.ready.size() == ready.size()) {
      std::sort(c.ready.begin(), c.ready.end());
      const int32_t key = InternConfig(std::move(c));
      if (key != kDead) id = key;
    }
  }
  local_[config] = {id, id == config ? 0 : context};
  return id;
}

int32_t Pda::Context(int32_t config) {
  if (Local(config) == config) return kDead;
  return ContextOf(local_[config].second);
}

int32_t Pda::ContextOf(int32_t node) {
  auto it = contexts_.find(node);
  if (it != contexts_.end()) return it->second;
  work_.assign(1, node);
  const int32_t id = Close();
  contexts_[node] = id;
  return id;
}

bool Pda::PrefixFree(int32_t chain) {
  prefix_free_.resize(g_.chains.size(), -1);
  if (prefix_free_[chain] >= 0) return prefix_free_[chain] == 1;
  const Element e = g_.chains[chain].e;
  bool ok = !e.is_rule;  // a byte set: one byte per iteration
  if (e.is_rule) {
    // The element alone, on the hole: it is prefix-free iff no configuration reached from its
    // start has both a finished parse (the hole) and one that goes on.
    work_.clear();
    for (int32_t a : g_.rules[e.index]) {
      work_.push_back(g_.alts[a].empty() ? hole_ : Intern(Frame(a, 0), hole_));
    }
    const int32_t start = Close();
    ok = start != kDead && !configs_[start].hole;
    std::vector<int32_t> queue = {start};
    std::unordered_map<int32_t, char> seen = {{start, 1}};
    for (size_t q = 0; ok && q < queue.size(); ++q) {
      for (int b = 0; b < 256 && ok; ++b) {
        if (!configs_[queue[q]].first.Has(static_cast<uint8_t>(b))) continue;
        const int32_t next = Next(queue[q], static_cast<uint8_t>(b));
        if (next == kDead || !seen.emplace(next, 1).second) continue;
        if (configs_[next].hole && live_locally(next)) ok = false;
        if (seen.size() > 256) ok = false;  // not a small automaton: don't rely on it
        if (!configs_[next].hole) queue.push_back(next);
      }
    }
    ok = ok && status_.ok();
  }
  prefix_free_[chain] = ok ? 1 : 0;
  return ok;
}

Pda::FamilyKey Pda::Family(int32_t key, int32_t max_top) {
  if (!has_chains() || key == kDead) return {};
  auto it = family_.find(key);
  if (it != family_.end()) return it->second;
  // The candidate chains: the topmost chain frame of each stack. (alt, 1): inside an iteration of
  // a rule; (alt, 0): at one that reads a byte set. The first candidate that forms a family wins
  // (e.g. inside a label of (\.label){0,3}: the label's own repetition, not the enclosing one).
  FamilyKey f;
  std::vector<std::pair<int32_t, int32_t>> tried;          // (chain, exit)
  const std::vector<int32_t> ready = configs_[key].ready;  // InternConfig may grow configs_
  for (int32_t m : ready) {
    for (int32_t n = m; n > hole_; n = parents_[n]) {
      const int32_t alt = static_cast<int32_t>(frames_[n] >> 32);
      const int32_t pos = static_cast<int32_t>(frames_[n] & 0xffffffffu);
      if (pos > 1 || alt >= static_cast<int32_t>(g_.chain_of.size()) || g_.chain_of[alt] < 0)
        continue;
      const std::pair<int32_t, int32_t> candidate = {g_.chain_of[alt], parents_[n]};
      const bool long_chain =
          static_cast<int32_t>(g_.chains[candidate.first].alts.size()) >= kMinFamilyLength;
      if (long_chain && std::find(tried.begin(), tried.end(), candidate) == tried.end()) {
        tried.push_back(candidate);
        f = FamilyOf(key, candidate.first, g_.chain_left[alt], candidate.second, max_top);
      }
      break;
    }
    if (f.canonical >= 0) break;
  }
  family_[key] = f;
  return f;
}

Pda::FamilyKey Pda::FamilyOf(int32_t key, int32_t chain, int32_t left, int32_t exit,
                             int32_t max_top) {
  FamilyKey f;
  f.chain = chain;  // the representative chain once the key is known to be a position of `chain`
  f.r = left;
  f.key_exit = exit;
  const std::vector<int32_t> ready = configs_[key].ready;  // InternConfig may grow configs_
  std::vector<int32_t> chain_node(ready.size(), -1);       // each in-chain stack's chain frame
  // Every stack is the exit, on the exit through a chain frame with r left, or elsewhere (a parse
  // that left the repetition before: the same for every r).
  bool ok = true;
  for (size_t i = 0; i < ready.size() && ok; ++i) {
    if (ready[i] == exit) continue;
    int32_t n = ready[i];
    while (n != 0 && parents_[n] != exit) n = parents_[n];
    if (n == 0) {
      f.has_others = true;
      continue;
    }
    const int32_t alt = static_cast<int32_t>(frames_[n] >> 32);
    const int32_t pos = static_cast<int32_t>(frames_[n] & 0xffffffffu);
    ok = pos <= 1 && alt < static_cast<int32_t>(g_.chain_of.size()) &&
         g_.chain_of[alt] == f.chain && g_.chain_left[alt] == f.r;
    chain_node[i] = n;
  }
  ok = ok && !configs_[key].accept && exit > hole_;  // exit: a frame that reads a byte set
  ok = ok && PrefixFree(f.chain);
  // The exit's frame alone, on the hole: the frames past it are the context (ExitContext).
  if (ok) {
    f.exit = CanonicalExit(exit);
    ok = f.exit >= 0;
  }
  if (ok) {
    f.chain = RepresentativeChain(chain);
    const std::vector<int32_t>& alts = g_.chains[f.chain].alts;
    f.top = std::min(static_cast<int32_t>(alts.size()), max_top);
    // Past `max_top` iterations no token can tell the difference.
    const int32_t r = f.r;
    f.r = std::min(f.r, f.top);
    f.canonical = key;
    if (r != f.top || f.has_others || f.exit != exit || f.chain != chain) {
      // The in-chain stacks with `top` left, and the exit; not the others (Mask adds theirs).
      Config c;
      std::vector<int32_t> above;
      for (size_t i = 0; i < ready.size() && ok; ++i) {
        if (ready[i] == exit) c.ready.push_back(f.exit);
        if (chain_node[i] < 0) continue;
        above.clear();
        for (int32_t n = ready[i]; n != chain_node[i]; n = parents_[n]) above.push_back(n);
        const int32_t pos = static_cast<int32_t>(frames_[chain_node[i]] & 0xffffffffu);
        int32_t node = Intern(Frame(alts[f.top - 1], pos), f.exit);
        for (size_t k = above.size(); k-- > 0 && node >= 0;) node = Intern(frames_[above[k]], node);
        ok = node >= 0;
        c.ready.push_back(node);
      }
      if (ok) {
        std::sort(c.ready.begin(), c.ready.end());
        c.ready.erase(std::unique(c.ready.begin(), c.ready.end()), c.ready.end());
        for (int32_t m : c.ready) c.first |= g_.sets[ElementAt(m).index];
        f.canonical = InternConfig(std::move(c));
        ok = f.canonical != kDead;
      }
    }
  }
  if (ok) {
    Config c;
    c.ready = {f.exit};
    const Element e = ElementAt(f.exit);
    ok = !e.is_rule;
    if (ok) {
      c.first = g_.sets[e.index];
      f.exit_config = InternConfig(std::move(c));
      ok = f.exit_config != kDead;
    }
  }
  if (!ok) f = FamilyKey{};
  return f;
}

Pda::FamilyKey Pda::Mandatory(int32_t config, int32_t max_top) {
  if (g_.mandatory_chain.empty() || config == kDead) return {};
  auto it = mandatory_.find(config);
  if (it != mandatory_.end()) return it->second;
  FamilyKey f;
  const std::vector<int32_t> ready = configs_[config].ready;  // InternConfig may grow configs_
  int32_t rep = -1;                                           // the node (rep, q) every stack is on
  bool ok = !ready.empty() && !configs_[config].accept;
  for (size_t i = 0; i < ready.size() && ok; ++i) {
    int32_t n = ready[i];
    while (n != 0) {
      const int32_t alt = static_cast<int32_t>(frames_[n] >> 32);
      if (alt < static_cast<int32_t>(g_.mandatory_chain.size()) && g_.mandatory_chain[alt] >= 0)
        break;
      n = parents_[n];
    }
    ok = n != 0 && (rep < 0 || rep == n);
    rep = n;
  }
  int32_t m = 0;
  if (ok) {
    const int32_t alt = static_cast<int32_t>(frames_[rep] >> 32);
    const int32_t pos = static_cast<int32_t>(frames_[rep] & 0xffffffffu);
    const int32_t min = static_cast<int32_t>(g_.alts[alt].size()) - 1;
    f.chain = g_.mandatory_chain[alt];
    const Grammar::Chain& chain = g_.chains[f.chain];
    // A byte-set element is read by (rep, p) itself; a rule's frames return to (rep, q = p + 1).
    const bool byte_set = !chain.e.is_rule;
    ok = byte_set ? ready.size() == 1 && ready[0] == rep && pos < min
                  : ready[0] != rep && pos >= 1 && pos <= min;
    m = byte_set ? min - pos : min - pos + 1;
    ok = ok && static_cast<int32_t>(chain.alts.size()) >= kMinFamilyLength && PrefixFree(f.chain);
    const int32_t exit = parents_[rep];
    ok = ok && exit > hole_;
    if (ok) {
      const uint64_t fr = frames_[exit];
      const Element e = g_.alts[static_cast<size_t>(fr >> 32)][fr & 0xffffffffu];
      ok = !e.is_rule;  // the exit reads a byte set
    }
    if (ok) {
      // The classes of the longest chain of this element (RepresentativeChain).
      const int32_t total = m + static_cast<int32_t>(chain.alts.size());
      f.chain = RepresentativeChain(f.chain);
      f.top = std::min(static_cast<int32_t>(g_.chains[f.chain].alts.size()), max_top);
      // Past top - 1 only when no token can need top iterations (see the header).
      ok = total < f.top || f.top == max_top;
      f.r = std::min(total, f.top - 1);
      f.min_exit = m;
      f.context_node = parents_[exit];
      f.exit = CanonicalExit(exit);
      ok = ok && f.exit >= 0;
    }
    if (ok) {
      // The canonical key: the element's frames on the chain's frame with top left.
      const int32_t alt_top = g_.chains[f.chain].alts[f.top - 1];
      Config c;
      std::vector<int32_t> above;
      for (int32_t s : ready) {
        above.clear();
        for (int32_t n = s; n != rep; n = parents_[n]) above.push_back(n);
        int32_t node = Intern(Frame(alt_top, byte_set ? 0 : 1), f.exit);
        for (size_t k = above.size(); k-- > 0 && node >= 0;) node = Intern(frames_[above[k]], node);
        ok = ok && node >= 0;
        c.ready.push_back(node);
      }
      // At an iteration's start the chain's positions also have the exit ready (the tail may
      // end there): the same canonical key as theirs, so the classes are shared.
      if (ok) {
        work_.assign(1, Intern(Frame(alt_top, 0), f.exit));
        const int32_t start = Close();
        std::sort(c.ready.begin(), c.ready.end());
        ok = start != kDead;
        if (ok && configs_[start].ready == c.ready) c.ready.push_back(f.exit);
      }
      if (ok) {
        std::sort(c.ready.begin(), c.ready.end());
        for (int32_t n : c.ready) c.first |= g_.sets[ElementAt(n).index];
        f.canonical = InternConfig(std::move(c));
        ok = f.canonical != kDead;
      }
    }
    if (ok) {
      Config c;
      c.ready = {f.exit};
      c.first = g_.sets[ElementAt(f.exit).index];
      f.exit_config = InternConfig(std::move(c));
      ok = f.exit_config != kDead;
    }
  }
  if (!ok) f = FamilyKey{};
  mandatory_[config] = f;
  return f;
}

int32_t Pda::RepresentativeChain(int32_t chain) {
  if (representative_.empty()) {
    // The longest chain of each element (the first one among the longest).
    representative_.resize(g_.chains.size());
    std::unordered_map<uint64_t, int32_t> longest;  // element -> chain
    for (size_t c = 0; c < g_.chains.size(); ++c) {
      const Element e = g_.chains[c].e;
      const uint64_t id = static_cast<uint64_t>(e.is_rule) << 32 | static_cast<uint32_t>(e.index);
      auto [it, added] = longest.emplace(id, static_cast<int32_t>(c));
      if (!added && g_.chains[c].alts.size() > g_.chains[it->second].alts.size()) {
        it->second = static_cast<int32_t>(c);
      }
    }
    for (size_t c = 0; c < g_.chains.size(); ++c) {
      const Element e = g_.chains[c].e;
      representative_[c] =
          longest[static_cast<uint64_t>(e.is_rule) << 32 | static_cast<uint32_t>(e.index)];
    }
  }
  return representative_[chain];
}

int32_t Pda::CanonicalExit(int32_t exit) {
  const uint64_t f = frames_[exit];
  const int32_t alt = static_cast<int32_t>(f >> 32);
  const int32_t pos = static_cast<int32_t>(f & 0xffffffffu);
  const Element e = g_.alts[alt][pos];
  if (e.is_rule || pos + 1 != static_cast<int32_t>(g_.alts[alt].size())) {
    return Intern(f, hole_);
  }
  // The last element of its alternative, a byte set: the same as an alternative of that set
  // alone (no rule uses it), shared by every exit that reads the same set.
  auto it = exit_alts_.find(e.index);
  if (it == exit_alts_.end()) {
    g_.alts.push_back({e});
    it = exit_alts_.emplace(e.index, static_cast<int32_t>(g_.alts.size() - 1)).first;
  }
  return Intern(Frame(it->second, 0), hole_);
}

int32_t Pda::InConfig(int32_t config, int32_t key_node) {
  if (Local(config) == config) return key_node;  // the key is the configuration itself
  std::vector<int32_t> chain;
  for (int32_t n = key_node; n != hole_; n = parents_[n]) chain.push_back(n);
  int32_t node = local_[config].second;
  for (size_t i = chain.size(); i-- > 0 && node >= 0;) node = Intern(frames_[chain[i]], node);
  return node;
}

int32_t Pda::ExitContext(int32_t config, const FamilyKey& f) {
  if (f.context_node >= 0) return ContextOf(f.context_node);
  const int32_t parent = parents_[f.key_exit];
  if (parent == hole_) return Context(config);
  const int32_t node = InConfig(config, parent);
  return node < 0 ? kDead : ContextOf(node);
}

int32_t Pda::FamilyOthers(int32_t config, const FamilyKey& f) {
  if (!f.has_others) return kDead;
  auto it = others_.find(config);
  if (it != others_.end()) return it->second;
  // The key's exit with the hole replaced by the context Local cut off: the exit in `config`.
  const int32_t exit = InConfig(config, f.key_exit);
  int32_t id = -1;
  if (exit >= 0) {
    Config c;
    for (int32_t m : configs_[config].ready) {
      int32_t n = m;
      while (n != 0 && n != exit) n = parents_[n];
      if (n == exit) continue;
      c.ready.push_back(m);  // a subsequence of a sorted list: sorted
      c.first |= g_.sets[ElementAt(m).index];
    }
    id = c.ready.empty() ? kDead : InternConfig(std::move(c));
    if (id == kDead && !status_.ok()) id = -1;
  }
  others_[config] = id;
  return id;
}

int32_t Pda::StackConfig(int32_t config, int32_t i) {
  const Config& whole = configs_[config];
  if (whole.ready.size() == 1 && !whole.accept) return config;
  Config c;
  const int32_t m = whole.ready[static_cast<size_t>(i)];
  c.ready.push_back(m);
  c.first = g_.sets[ElementAt(m).index];
  return InternConfig(std::move(c));
}

int32_t Pda::Need(const FamilyKey& f, int32_t config) const {
  const Config& c = configs_[config];
  bool at_exit = false;
  int32_t j = -1;
  for (int32_t m : c.ready) {
    if (m == hole_) continue;
    if (m == f.exit) {
      at_exit = true;
      continue;
    }
    int32_t n = m;
    while (n != 0 && parents_[n] != f.exit) n = parents_[n];
    if (n == 0) continue;  // left the repetition before: followed from exit_config
    const int32_t alt = static_cast<int32_t>(frames_[n] >> 32);
    const int32_t pos = static_cast<int32_t>(frames_[n] & 0xffffffffu);
    if (pos > 1 || alt >= static_cast<int32_t>(g_.chain_of.size()) || g_.chain_of[alt] != f.chain)
      return -2;
    if (j >= 0 && j != g_.chain_left[alt]) return -2;
    j = g_.chain_left[alt];
  }
  // After i complete iterations the chain frame has top - i left; a parse at the repetition's
  // end after i iterations needs r >= i, one inside iteration i + 1 needs r >= i + 1.
  if (j < 0) return at_exit ? f.top : -1;
  return at_exit ? f.top - j : f.top - j + 1;
}

int32_t Pda::Compute(int32_t config, uint8_t b) {
  if (!status_.ok() || !configs_[config].first.Has(b)) return kDead;
  // The next configuration depends only on which ready stacks accept the byte, so every byte
  // of `b`'s class (the same acceptance by every ready stack) gets the same transition: one
  // closure per class instead of one per byte (a string's interior has ~10 classes, not ~200
  // bytes). The classes are computed once per configuration.
  if (configs_[config].byte_class.empty()) configs_[config].byte_class = ByteClasses(config);
  const std::vector<int32_t> ready = configs_[config].ready;  // Close() may grow configs_
  work_.clear();
  for (int32_t m : ready) {
    const uint64_t f = frames_[m];
    if (g_.sets[g_.alts[static_cast<size_t>(f >> 32)][f & 0xffffffffu].index].Has(b))
      work_.push_back(After(m));
  }
  const int32_t result = Close();
  if (status_.ok()) {
    const std::vector<uint8_t>& cls = configs_[config].byte_class;
    const uint8_t mine = cls[b];
    const size_t row = static_cast<size_t>(config) * 256;
    for (int other = 0; other < 256; ++other) {
      if (cls[other] == mine && next_[row + other] < 0) next_[row + other] = result;
    }
  }
  return result;
}

std::vector<uint8_t> Pda::ByteClasses(int32_t config) const {
  // Partition refinement by each distinct byte set of the ready stacks: the bytes of the set (or
  // of its complement, whichever is smaller: the same split) move to a new class per old class.
  std::vector<int32_t> sets;
  for (int32_t m : configs_[config].ready) {
    const uint64_t f = frames_[m];
    sets.push_back(g_.alts[static_cast<size_t>(f >> 32)][f & 0xffffffffu].index);
  }
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  std::vector<int32_t> cls(256, 0), remap(1, 0), stamp(1, -1);
  for (size_t k = 0; k < sets.size(); ++k) {
    const ByteSet& set = g_.sets[sets[k]];
    int count = 0;
    for (uint64_t w : set.words) count += __builtin_popcountll(w);
    const uint64_t flip = count > 128 ? ~uint64_t{0} : 0;
    for (int word = 0; word < 4; ++word) {
      for (uint64_t bits = set.words[word] ^ flip; bits; bits &= bits - 1) {
        const int byte = word * 64 + __builtin_ctzll(bits);
        const int32_t old = cls[byte];
        if (stamp[old] != static_cast<int32_t>(k)) {
          stamp[old] = static_cast<int32_t>(k);
          remap[old] = static_cast<int32_t>(remap.size());
          remap.push_back(0);
          stamp.push_back(-1);
        }
        cls[byte] = remap[old];
      }
    }
  }
  // Number the classes 0.. in byte order.
  std::vector<int16_t> number(remap.size(), -1);
  std::vector<uint8_t> out(256);
  int16_t n = 0;
  for (int byte = 0; byte < 256; ++byte) {
    int16_t& id = number[cls[byte]];
    if (id < 0) id = n++;
    out[byte] = static_cast<uint8_t>(id);
  }
  return out;
}

}  // namespace dsinfer::structured
