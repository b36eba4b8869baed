#include "structured/token_automaton.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace dsinfer::structured {

TokenAutomaton::TokenAutomaton(Grammar grammar, std::shared_ptr<const Vocabulary> vocab,
                               PdaLimits limits, size_t max_cached_masks)
    : pda_(std::move(grammar), limits),
      vocab_(std::move(vocab)),
      initial_(pda_.initial()),
      max_cached_masks_(max_cached_masks) {}

int32_t TokenAutomaton::AdvanceToken(int32_t config, int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  return AdvanceTokenLocked(config, token);
}

std::optional<TokenAutomaton::Step> TokenAutomaton::TryAdvanceToken(int32_t config, int32_t token) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  Step step;
  step.config = AdvanceTokenLocked(config, token);
  step.completed =
      step.config != Pda::kDead && pda_.accepting(step.config) && !pda_.can_continue(step.config);
  return step;
}

void TokenAutomaton::RunExclusive(const std::function<void()>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn();
}

TokenAutomaton::Precomputed TokenAutomaton::Precompute(int32_t max_configs,
                                                       std::chrono::microseconds budget) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  Precomputed out;
  const int32_t max_top = vocab_->trie().max_depth() + 1;
  // What a mask computes once per class of configurations is computed here once per class met;
  // the configurations of a class that was expanded before are not expanded again: their
  // transitions inside the class's frames lead to the classes met from the first one, so only
  // their context is followed (Pda::Context: the configuration after the class's frames).
  // Classes: a family (its canonical key) in one context (a position of each string expanded:
  // the positions inside a character met from it have families of their own, and their tokens
  // past the exit depend on the context), a counted key's canonical key, a local key.
  // (kind, canonical key, a mandatory position's iterations, context)
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t>> expanded;
  std::vector<char> seen(static_cast<size_t>(pda_.num_configs()), 0);
  std::vector<int32_t> queue = {initial_};
  seen[static_cast<size_t>(initial_)] = 1;
  const auto push = [&](int32_t next) {
    if (next == Pda::kDead) return;
    if (static_cast<size_t>(next) >= seen.size()) seen.resize(pda_.num_configs(), 0);
    if (seen[static_cast<size_t>(next)]) return;
    seen[static_cast<size_t>(next)] = 1;
    queue.push_back(next);
  };
  const size_t max_classes = std::min<size_t>(max_cached_masks_, kPrecomputedKeys);
  bool capped = false;  // a key or mask left out by the bounds above
  for (size_t head = 0; head < queue.size(); ++head) {
    if (pda_.num_configs() > max_configs || !pda_.status().ok() ||
        std::chrono::steady_clock::now() > deadline) {
      break;
    }
    const int32_t config = queue[head];
    ++out.configs;
    if (!pda_.can_continue(config)) continue;
    // As MaskOf finds a configuration's family, or its local key.
    const int32_t key = pda_.Local(config);
    Pda::FamilyKey family = pda_.has_chains() ? pda_.Family(key, max_top) : Pda::FamilyKey{};
    if (family.canonical < 0 && pda_.has_chains()) family = pda_.Mandatory(config, max_top);
    std::shared_ptr<const FamilyClasses> c;
    if (family.canonical >= 0) {
      if (!families_.count(family.canonical)) ++out.families;
      c = KeyFamilyClasses(family);
      if (family.min_exit > 0 && c->left_live) family.canonical = -1;  // as MaskOf
    }
    std::tuple<int32_t, int32_t, int32_t, int32_t> cls = {-1, 0, 0, 0};  // -1: no class
    if (family.canonical >= 0) {
      // The tokens past the repetition's exit that this position's context allows (a walk of
      // the trie below the exit's bytes per context: for a long string's closing quote, ms).
      const int32_t context =
          c->after.empty() && c->end_list.empty() ? Pda::kDead : pda_.ExitContext(config, family);
      if (context != Pda::kDead && !c->after.empty()) ExitTokens(*c, family.canonical, context);
      if (family.has_others) {
        // The masks of the stacks that left the repetition (shared by the positions that hold
        // them: the top-level domain's parses beside a hostname's labels), each a walk otherwise.
        const int32_t others = pda_.FamilyOthers(config, family);
        for (int32_t k = 0, n = others > 0 ? pda_.num_stacks(others) : 0; k < n; ++k) {
          const int32_t part = pda_.StackConfig(others, k);
          if (part != Pda::kDead && !masks_.count(part) && out.masks < kPrecomputedMasks) {
            MaskOf(part, /*counted=*/false);
            ++out.masks;
          }
        }
      }
      cls = {0, family.canonical, family.min_exit, context};
    } else if (key != config) {
      const int32_t canonical = pda_.has_counters() ? pda_.Canonical(key) : key;
      const Part part = canonical != key ? Part::kShort : Part::kAll;
      const int64_t id = int64_t{canonical} * 4 + static_cast<int64_t>(part);
      cls = {1, canonical, static_cast<int32_t>(part), 0};
      auto known = classes_.find(id);
      std::shared_ptr<const Classes> classes;
      if (known != classes_.end()) {
        classes = known->second;
      } else if (classes_.size() >= max_classes || out.bytes >= kPrecomputedBytes) {
        capped = true;  // its first masks walk and classify it
      } else {
        classes = KeyClasses(canonical, part);
        ++out.keys;
        out.bytes += static_cast<int64_t>(classes->accepted.size() * sizeof(uint64_t));
        for (const auto& list : classes->after)
          out.bytes += static_cast<int64_t>(list.size() * sizeof(int32_t));
      }
      // The tokens past the key's frames that this configuration's context allows.
      if (classes && !classes->after.empty()) {
        const int32_t context = pda_.Context(config);
        if (context != Pda::kDead) KeyExitTokens(*classes, id, context);
      }
    } else if (!masks_.count(config)) {
      if (out.masks < kPrecomputedMasks) {
        MaskOf(config, /*counted=*/false);  // no context: its own mask
        ++out.masks;
      } else {
        capped = true;
      }
    }
    if (std::get<0>(cls) >= 0 && !expanded.insert(cls).second) {
      push(pda_.Context(config));
      continue;
    }
    const ByteSet first = pda_.first_bytes(config);  // a copy: Next() may grow the table
    for (int b = 0; b < 256; ++b) {
      if (first.Has(static_cast<uint8_t>(b))) push(pda_.Next(config, static_cast<uint8_t>(b)));
    }
  }
  out.complete = queue.size() == static_cast<size_t>(out.configs) && !capped && pda_.status().ok();
  // The configurations that masks will add (one per context of a class) without moving the
  // transition table's rows at a mask (a copy of megabytes).
  pda_.Reserve(
      static_cast<int32_t>(std::min<int64_t>(int64_t{pda_.num_configs()} * 4, pda_.max_configs())));
  return out;
}

int32_t TokenAutomaton::AdvanceTokenLocked(int32_t config, int32_t token) {
  if (token == vocab_->eos_id()) return pda_.accepting(config) ? config : Pda::kDead;
  if (token < 0 || token >= vocab_->num_ids()) return Pda::kDead;
  const std::string& bytes = vocab_->bytes(token);
  if (bytes.empty()) return Pda::kDead;
  for (char c : bytes) {
    config = pda_.Next(config, static_cast<uint8_t>(c));
    if (config == Pda::kDead) break;
  }
  return config;
}

int32_t TokenAutomaton::AdvanceBytes(int32_t config, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (char c : bytes) {
    config = pda_.Next(config, static_cast<uint8_t>(c));
    if (config == Pda::kDead) break;
  }
  return config;
}

bool TokenAutomaton::accepting(int32_t config) {
  std::lock_guard<std::mutex> lock(mu_);
  return pda_.accepting(config);
}

bool TokenAutomaton::completed(int32_t config) {
  std::lock_guard<std::mutex> lock(mu_);
  return pda_.accepting(config) && !pda_.can_continue(config);
}

Status TokenAutomaton::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return pda_.status();
}

TokenAutomaton::Stats TokenAutomaton::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.configs = pda_.num_configs();
  return s;
}

std::shared_ptr<const TokenMask> TokenAutomaton::Mask(int32_t config) {
  std::lock_guard<std::mutex> lock(mu_);
  return MaskOf(config, /*counted=*/true);
}

std::shared_ptr<const TokenMask> TokenAutomaton::MaskOf(int32_t config, bool counted) {
  auto it = masks_.find(config);
  if (it != masks_.end()) {
    if (counted) ++stats_.mask_hits;
    return it->second;
  }
  if (counted) ++stats_.mask_misses;
  const Vocabulary& v = *vocab_;
  auto mask = std::make_shared<TokenMask>(static_cast<size_t>(v.mask_words()), 0);
  uint64_t* bits = mask->data();
  if (pda_.can_continue(config)) {
    const int32_t key = pda_.Local(config);
    const int32_t max_top = v.trie().max_depth() + 1;
    Pda::FamilyKey family = pda_.has_chains() ? pda_.Family(key, max_top) : Pda::FamilyKey{};
    if (family.canonical < 0 && pda_.has_chains()) family = pda_.Mandatory(config, max_top);
    std::shared_ptr<const FamilyClasses> c;
    if (family.canonical >= 0) {
      c = KeyFamilyClasses(family);
      // A mandatory position bounds the iterations of a parse that leaves the repetition from
      // below too; the classes record one bound per token only when every such parse reached the
      // context at once (e.g. a string's closing quote).
      if (family.min_exit > 0 && c->left_live) family.canonical = -1;
    }
    const int32_t canonical = pda_.has_counters() ? pda_.Canonical(key) : key;
    if (family.canonical >= 0) {
      // A position of a bounded string: the tokens that need at most r iterations, plus the
      // uncertain ones checked from here.
      const int32_t r = family.r;
      const TokenMask& m = c->needs[std::min<size_t>(r, c->needs.size() - 1)];
      std::copy(m.begin(), m.end(), bits);
      for (const auto& [need, id] : c->more) {
        if (need > r) break;
        bits[id >> 6] |= uint64_t{1} << (id & 63);
      }
      // The tokens that go past the exit: allowed where this position's context allows them.
      const int32_t context =
          c->end_list.empty() && c->after.empty() ? Pda::kDead : pda_.ExitContext(config, family);
      if (context != Pda::kDead) {
        auto add = [&](const std::vector<std::pair<int32_t, int32_t>>& list, int32_t from) {
          auto e = std::lower_bound(list.begin(), list.end(), std::make_pair(from, -1));
          for (; e != list.end() && e->first <= r; ++e)
            bits[e->second >> 6] |= uint64_t{1} << (e->second & 63);
        };
        int32_t from = family.min_exit;
        if (family.min_exit == 0 && !c->ends.empty()) {
          const TokenMask& e = c->ends[std::min<size_t>(r, c->ends.size() - 1)];
          for (size_t w = 0; w < e.size(); ++w) bits[w] |= e[w];
          from = static_cast<int32_t>(c->ends.size());  // the needs below are in `e`
        }
        add(c->end_list, from);
        if (!c->after.empty()) add(*ExitTokens(*c, family.canonical, context), family.min_exit);
      }
      if (c->uncertain.num_nodes() > 1) Walk(c->uncertain, config, c->uncertain.max_depth(), bits);
      // The stacks that left the repetition before: their own configuration's tokens.
      const int32_t others = pda_.FamilyOthers(config, family);
      if (others < 0) {
        ++stats_.config_walks;
        Walk(v.trie(), config, v.trie().max_depth(), bits);
      } else if (others != Pda::kDead) {
        // Stack by stack (Pda::StackConfig): each stack's mask is shared by the positions whose
        // others hold it.
        for (int32_t k = 0, n = pda_.num_stacks(others); k < n; ++k) {
          int32_t part = pda_.StackConfig(others, k);
          if (part == Pda::kDead) part = others;  // at a limit: all of them at once
          const auto add = MaskOf(part, /*counted=*/false);
          for (size_t w = 0; w < add->size(); ++w) bits[w] |= (*add)[w];
          if (part == others) break;
        }
      }
    } else if (canonical != key) {
      // Tokens of at most kCounterWindow bytes: the canonical key's classes (shared by the
      // positions of a long bounded repetition); the few longer ones: walked from here.
      AddClasses(*KeyClasses(canonical, Part::kShort),
                 int64_t{canonical} * 4 + static_cast<int64_t>(Part::kShort), config, bits);
      Walk(v.long_trie(), config, v.long_trie().max_depth(), bits);
    } else if (key != config &&
               (classes_.count(int64_t{key} * 4) || !seen_keys_.insert(key).second)) {
      // A key met before (another context of the same string, item or object): its classes.
      AddClasses(*KeyClasses(key, Part::kAll), int64_t{key} * 4, config, bits);
    } else {
      // A key met for the first time (most are never met again): one walk, as classifying it
      // would cost as much.
      ++stats_.config_walks;
      Walk(v.trie(), config, v.trie().max_depth(), bits);
    }
  }
  if (pda_.accepting(config) && v.eos_id() >= 0 && v.eos_id() < v.size()) {
    bits[v.eos_id() >> 6] |= uint64_t{1} << (v.eos_id() & 63);
  }
  Remember(&masks_, &mask_order_, max_cached_masks_, config,
           std::shared_ptr<const TokenMask>(mask));
  return mask;
}

std::shared_ptr<const TokenAutomaton::Classes> TokenAutomaton::KeyClasses(int32_t key, Part part) {
  const int64_t id = int64_t{key} * 4 + static_cast<int64_t>(part);
  auto it = classes_.find(id);
  if (it != classes_.end()) return it->second;
  const Vocabulary& v = *vocab_;
  const int32_t max_depth = part == Part::kShort ? kCounterWindow : v.trie().max_depth();
  auto c = std::make_shared<const Classes>(Classify(v.trie(), key, max_depth));
  Remember(&classes_, &classes_order_, max_cached_masks_, id, c);
  return c;
}

std::shared_ptr<const TokenAutomaton::FamilyClasses> TokenAutomaton::KeyFamilyClasses(
    const Pda::FamilyKey& f) {
  auto it = families_.find(f.canonical);
  if (it != families_.end()) return it->second;
  const Vocabulary& v = *vocab_;
  const TokenTrie& trie = v.trie();
  ++stats_.key_walks;
  ++stats_.family_walks;
  auto out = std::make_shared<FamilyClasses>();
  const int32_t buckets = std::min(f.top, FamilyClasses::kBuckets);
  out->needs.assign(static_cast<size_t>(buckets) + 1,
                    TokenMask(static_cast<size_t>(v.mask_words()), 0));
  std::vector<int32_t> uncertain;
  needs_.assign(static_cast<size_t>(pda_.num_configs()), 0);
  auto need_of = [&](int32_t config) {
    if (static_cast<size_t>(config) >= needs_.size()) needs_.resize(config + 1, 0);
    if (needs_[config] == 0) needs_[config] = pda_.Need(f, config) + 3;
    return needs_[config] - 3;
  };
  const size_t depths = static_cast<size_t>(trie.max_depth()) + 1;
  walk_states_.assign(depths, Pda::kDead);
  walk_touched_.assign(depths, 0);  // here: every token below is checked per configuration
  walk_states_[0] = f.canonical;
  // The parses that left the repetition (at a boundary where `exit` was ready), followed from
  // exit_config: (configuration, the fewest iterations left at which that boundary is reached).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> left(depths);
  std::vector<std::pair<int32_t, int32_t>> node_ends;  // (need, id) of the current node
  std::vector<FamilyClasses::Subtree> node_after;
  const std::vector<int32_t>& ids = trie.token_ids();
  const int32_t n = trie.num_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t depth = trie.node_depth(i);
    const uint8_t byte = trie.node_byte(i);
    const int32_t prev = walk_states_[depth - 1];
    const int32_t s = pda_.Next(prev, byte);
    bool check = walk_touched_[depth - 1];
    auto& cur = left[depth];
    cur.clear();
    auto follow = [&](int32_t c, int32_t need) {
      if (c == Pda::kDead) return;
      // A parse that left the repetition and came back into it (or to its end): the stacks on
      // `exit` no longer count one parse's iterations; checked per configuration below.
      if (need_of(c) != -1) check = true;
      if (pda_.has_hole(c)) {
        // Reached the context here: the tokens ending here are allowed, those below where the
        // context allows the rest of their bytes.
        for (int32_t t = trie.token_begin(i); t < trie.token_begin(i + 1); ++t)
          node_ends.push_back({need, ids[t]});
        for (int32_t j = i + 1; j < trie.subtree_end(i); j = trie.subtree_end(j))
          node_after.push_back({need, j});
      }
      if (!pda_.live_locally(c)) return;
      for (auto& [config, k] : cur) {
        if (config == c) {
          k = std::min(k, need);
          return;
        }
      }
      cur.push_back({c, need});
      out->left_live = true;
    };
    node_ends.clear();
    node_after.clear();
    for (const auto& [c, need] : left[depth - 1]) follow(pda_.Next(c, byte), need);
    if (prev != Pda::kDead && pda_.HasReady(prev, f.exit)) {
      const int32_t need = need_of(prev);
      if (need >= 0) {
        follow(pda_.Next(f.exit_config, byte), need);
      } else {
        check = true;  // not of the family's form
      }
    }
    // With `check`, the needs below are not one parse's: only the canonical key's (r = top) is
    // certain.
    for (auto& [need, id] : node_ends) out->end_list.push_back({check ? f.top : need, id});
    for (FamilyClasses::Subtree e : node_after) {
      if (check) e.need = f.top;
      if (out->after.empty()) out->after.resize(256);
      out->after[trie.node_byte(e.node)].push_back(e);
    }
    if (s == Pda::kDead && cur.empty()) {
      if (check) {
        for (int32_t t = trie.token_begin(i); t < trie.token_begin(trie.subtree_end(i)); ++t)
          uncertain.push_back(ids[t]);
      }
      i = trie.subtree_end(i);
      continue;
    }
    walk_states_[depth] = s;
    const int32_t t0 = trie.token_begin(i), t1 = trie.token_begin(i + 1);
    if (t0 < t1) {
      bool check_here = check;
      int32_t need = -1;  // none: no parse is alive inside the key's frames
      if (s != Pda::kDead) {
        need = need_of(s);
        if (need == -2) check_here = true;  // not of the family's form
      }
      for (const auto& [c, k] : cur) need = need < 0 ? k : std::min(need, k);
      // Checked per configuration below r = top; at top (the canonical key) allowed when alive.
      if (check_here) need = (s != Pda::kDead && pda_.live_locally(s)) || !cur.empty() ? f.top : -1;
      for (int32_t t = t0; t < t1; ++t) {
        const int32_t id = ids[t];
        if (check_here) uncertain.push_back(id);
        if (need < 0) continue;
        if (need <= buckets) {
          out->needs[need][id >> 6] |= uint64_t{1} << (id & 63);
        } else {
          out->more.push_back({need, id});
        }
      }
    }
    walk_touched_[depth] = check;
    ++i;
  }
  for (size_t r = 1; r < out->needs.size(); ++r) {
    for (size_t w = 0; w < out->needs[r].size(); ++w) out->needs[r][w] |= out->needs[r - 1][w];
  }
  std::sort(out->more.begin(), out->more.end());
  std::sort(out->end_list.begin(), out->end_list.end());
  out->end_list.erase(std::unique(out->end_list.begin(), out->end_list.end()), out->end_list.end());
  if (!out->end_list.empty() && out->end_list.front().first <= buckets) {
    out->ends.assign(static_cast<size_t>(buckets) + 1,
                     TokenMask(static_cast<size_t>(v.mask_words()), 0));
    for (const auto& [need, id] : out->end_list) {
      if (need > buckets) break;
      out->ends[need][id >> 6] |= uint64_t{1} << (id & 63);
    }
    for (size_t r = 1; r < out->ends.size(); ++r) {
      for (size_t w = 0; w < out->ends[r].size(); ++w) out->ends[r][w] |= out->ends[r - 1][w];
    }
  }
  for (auto& list : out->after) std::sort(list.begin(), list.end());
  if (!uncertain.empty()) out->uncertain = TokenTrie(v.all_bytes(), std::move(uncertain));
  std::shared_ptr<const FamilyClasses> result = std::move(out);
  Remember(&families_, &families_order_, std::max<size_t>(max_cached_masks_ / 16, 8), f.canonical,
           result);
  return result;
}

std::shared_ptr<const TokenAutomaton::ExitList> TokenAutomaton::ExitTokens(const FamilyClasses& c,
                                                                           int32_t canonical,
                                                                           int32_t context) {
  const int64_t id = int64_t{canonical} << 32 | static_cast<uint32_t>(context);
  auto it = exit_tokens_.find(id);
  if (it != exit_tokens_.end()) return it->second;
  const TokenTrie& trie = vocab_->trie();
  const std::vector<int32_t>& ids = trie.token_ids();
  auto out = std::make_shared<ExitList>();
  walk_states_.assign(static_cast<size_t>(trie.max_depth()) + 1, Pda::kDead);
  const ByteSet first = pda_.first_bytes(context);  // a copy: Next() may grow the table
  for (int b = 0; b < 256; ++b) {
    if (c.after[b].empty() || !first.Has(static_cast<uint8_t>(b))) continue;
    const int32_t start = pda_.Next(context, static_cast<uint8_t>(b));
    if (start == Pda::kDead) continue;
    for (const FamilyClasses::Subtree& e : c.after[b]) {
      // The subtree of e.node, its own byte read from the context into `start`.
      const int32_t base = trie.node_depth(e.node);
      walk_states_[base] = start;
      for (int32_t i = e.node, end = trie.subtree_end(e.node); i < end;) {
        const int32_t depth = trie.node_depth(i);
        const int32_t s =
            i == e.node ? start : pda_.Next(walk_states_[depth - 1], trie.node_byte(i));
        if (s == Pda::kDead) {
          i = trie.subtree_end(i);
          continue;
        }
        walk_states_[depth] = s;
        for (int32_t t = trie.token_begin(i); t < trie.token_begin(i + 1); ++t)
          out->push_back({e.need, ids[t]});
        ++i;
      }
    }
  }
  std::sort(out->begin(), out->end());
  std::shared_ptr<const ExitList> result = std::move(out);
  Remember(&exit_tokens_, &exit_tokens_order_, max_cached_masks_, id, result);
  return result;
}

TokenAutomaton::Classes TokenAutomaton::Classify(const TokenTrie& trie, int32_t key,
                                                 int32_t max_depth) {
  ++stats_.key_walks;
  Classes out;
  out.accepted.assign(static_cast<size_t>(vocab_->mask_words()), 0);
  out.max_depth = max_depth;
  uint64_t* bits = out.accepted.data();
  walk_states_.assign(static_cast<size_t>(trie.max_depth()) + 1, Pda::kDead);
  walk_states_[0] = key;
  const std::vector<int32_t>& ids = trie.token_ids();
  const int32_t n = trie.num_nodes();
  // Below a node whose bytes took a parse to the hole, every child starts what the context reads.
  const auto after = [&](int32_t node) {
    if (trie.node_depth(node) >= max_depth) return;
    if (out.after.empty()) out.after.resize(256);
    for (int32_t j = node + 1, end = trie.subtree_end(node); j < end; j = trie.subtree_end(j))
      out.after[trie.node_byte(j)].push_back(j);
  };
  if (pda_.has_hole(key)) after(0);
  for (int32_t i = 1; i < n;) {
    const int32_t depth = trie.node_depth(i);
    const int32_t s =
        depth > max_depth ? Pda::kDead : pda_.Next(walk_states_[depth - 1], trie.node_byte(i));
    if (s == Pda::kDead) {
      // Dead inside the key's frames: a parse that reached the hole above is in `after`.
      i = trie.subtree_end(i);
      continue;
    }
    walk_states_[depth] = s;
    // Live inside the key, or at the context's start (a context always reads on, or accepts).
    for (int32_t t = trie.token_begin(i); t < trie.token_begin(i + 1); ++t) {
      const int32_t id = ids[t];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (pda_.has_hole(s)) after(i);
    ++i;
  }
  return out;
}

void TokenAutomaton::AddClasses(const Classes& c, int64_t id, int32_t config, uint64_t* bits) {
  const size_t words = c.accepted.size();
  for (size_t w = 0; w < words; ++w) bits[w] |= c.accepted[w];
  if (c.after.empty()) return;
  const int32_t context = pda_.Context(config);
  if (context == Pda::kDead) return;
  const std::shared_ptr<const KeyExit> exit = KeyExitTokens(c, id, context);
  for (int32_t t : exit->ids) bits[t >> 6] |= uint64_t{1} << (t & 63);
  for (size_t w = 0; w < exit->mask.size(); ++w) bits[w] |= exit->mask[w];
}

std::shared_ptr<const TokenAutomaton::KeyExit> TokenAutomaton::KeyExitTokens(const Classes& c,
                                                                             int64_t id,
                                                                             int32_t context) {
  const int64_t cache_id = id << 32 | static_cast<uint32_t>(context);
  auto it = key_exit_tokens_.find(cache_id);
  if (it != key_exit_tokens_.end()) return it->second;
  const TokenTrie& trie = vocab_->trie();
  const std::vector<int32_t>& ids = trie.token_ids();
  auto result = std::make_shared<KeyExit>();
  std::vector<int32_t>* out = &result->ids;
  walk_states_.assign(static_cast<size_t>(trie.max_depth()) + 1, Pda::kDead);
  const ByteSet first = pda_.first_bytes(context);  // a copy: Next() may grow the table
  for (int b = 0; b < 256; ++b) {
    if (c.after[b].empty() || !first.Has(static_cast<uint8_t>(b))) continue;
    const int32_t start = pda_.Next(context, static_cast<uint8_t>(b));
    if (start == Pda::kDead) continue;
    for (const int32_t root : c.after[b]) {
      // The subtree of `root`, its own byte read from the context into `start`.
      walk_states_[trie.node_depth(root)] = start;
      for (int32_t i = root, end = trie.subtree_end(root); i < end;) {
        const int32_t depth = trie.node_depth(i);
        const int32_t s = i == root ? start
                          : depth > c.max_depth
                              ? Pda::kDead
                              : pda_.Next(walk_states_[depth - 1], trie.node_byte(i));
        if (s == Pda::kDead) {
          i = trie.subtree_end(i);
          continue;
        }
        walk_states_[depth] = s;
        for (int32_t t = trie.token_begin(i); t < trie.token_begin(i + 1); ++t)
          out->push_back(ids[t]);
        ++i;
      }
    }
  }
  if (static_cast<int64_t>(out->size()) > vocab_->mask_words() * 2) {
    result->mask.assign(static_cast<size_t>(vocab_->mask_words()), 0);
    for (int32_t t : *out) result->mask[t >> 6] |= uint64_t{1} << (t & 63);
    std::vector<int32_t>().swap(*out);
  }
  std::shared_ptr<const KeyExit> shared = std::move(result);
  Remember(&key_exit_tokens_, &key_exit_tokens_order_, max_cached_masks_, cache_id, shared);
  return shared;
}

void TokenAutomaton::Walk(const TokenTrie& trie, int32_t config, int32_t max_depth,
                          uint64_t* bits) {
  walk_states_.assign(static_cast<size_t>(trie.max_depth()) + 1, Pda::kDead);
  int32_t* states = walk_states_.data();
  states[0] = config;
  const int32_t* ids = trie.token_ids().data();
  const TokenTrie::Node* nodes = trie.nodes();
  const int32_t n = trie.num_nodes();
  for (int32_t i = 1; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t depth = node.depth;
    const int32_t s = depth > max_depth ? Pda::kDead : pda_.Next(states[depth - 1], node.byte);
    if (s == Pda::kDead) {
      i = node.end;
      continue;
    }
    states[depth] = s;
    for (int32_t t = node.tok_begin; t < node.tok_end; ++t) {
      const int32_t id = ids[t];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

}  // namespace dsinfer::structured
