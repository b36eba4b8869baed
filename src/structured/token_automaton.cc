#include "structured/token_automaton.h"

#include <algorithm>

namespace dsinfer::structured {

TokenAutomaton::TokenAutomaton(Grammar grammar, std::shared_ptr<const Vocabulary> vocab,
                               PdaLimits limits, size_t max_cached_masks)
    : pda_(std::move(grammar), limits),
      vocab_(std::move(vocab)),
      initial_(pda_.initial()),
      max_cached_masks_(max_cached_masks) {}

int32_t TokenAutomaton::AdvanceToken(int32_t config, int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
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

void TokenAutomaton::Remember(std::unordered_map<int32_t, std::shared_ptr<const TokenMask>>* cache,
                              std::deque<int32_t>* order, size_t cap, int32_t key,
                              std::shared_ptr<const TokenMask> mask) {
  if (cap == 0) return;
  if (cache->size() >= cap) {
    cache->erase(order->front());
    order->pop_front();
  }
  cache->emplace(key, std::move(mask));
  order->push_back(key);
}

std::shared_ptr<const TokenMask> TokenAutomaton::Mask(int32_t config) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(config);
  if (it != masks_.end()) {
    ++stats_.mask_hits;
    return it->second;
  }
  ++stats_.mask_misses;
  const Vocabulary& v = *vocab_;
  auto mask = std::make_shared<TokenMask>(static_cast<size_t>(v.mask_words()), 0);
  uint64_t* bits = mask->data();
  if (pda_.can_continue(config)) {
    const int32_t canonical = pda_.has_counters() ? pda_.Canonical(config) : config;
    if (canonical == config) {
      Walk(v.trie(), config, v.trie().max_depth(), bits);
    } else {
      // Tokens of at most kCounterWindow bytes: the canonical configuration's (shared); longer
      // ones: walked from this configuration.
      auto s = short_masks_.find(canonical);
      std::shared_ptr<const TokenMask> short_mask;
      if (s != short_masks_.end()) {
        short_mask = s->second;
      } else {
        auto fresh = std::make_shared<TokenMask>(static_cast<size_t>(v.mask_words()), 0);
        Walk(v.trie(), canonical, kCounterWindow, fresh->data());
        short_mask = fresh;
        Remember(&short_masks_, &short_order_, max_cached_masks_, canonical, short_mask);
      }
      std::copy(short_mask->begin(), short_mask->end(), mask->begin());
      Walk(v.long_trie(), config, v.long_trie().max_depth(), bits);
    }
  }
  if (pda_.accepting(config) && v.eos_id() >= 0 && v.eos_id() < v.size()) {
    bits[v.eos_id() >> 6] |= uint64_t{1} << (v.eos_id() & 63);
  }
  Remember(&masks_, &mask_order_, max_cached_masks_, config, mask);
  return mask;
}

void TokenAutomaton::Walk(const TokenTrie& trie, int32_t config, int32_t max_depth,
                          uint64_t* bits) {
  walk_states_.assign(static_cast<size_t>(trie.max_depth()) + 1, Pda::kDead);
  walk_states_[0] = config;
  const std::vector<int32_t>& ids = trie.token_ids();
  const int32_t n = trie.num_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t depth = trie.node_depth(i);
    const int32_t s =
        depth > max_depth ? Pda::kDead : pda_.Next(walk_states_[depth - 1], trie.node_byte(i));
    if (s == Pda::kDead) {
      i = trie.subtree_end(i);
      continue;
    }
    walk_states_[depth] = s;
    for (int32_t t = trie.token_begin(i); t < trie.token_begin(i + 1); ++t) {
      const int32_t id = ids[t];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

}  // namespace dsinfer::structured
