#include "structured/token_automaton.h"

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

std::shared_ptr<const TokenMask> TokenAutomaton::Mask(int32_t config) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(config);
  if (it != masks_.end()) {
    ++stats_.mask_hits;
    return it->second;
  }
  ++stats_.mask_misses;
  auto mask = Walk(config);
  if (max_cached_masks_ == 0) return mask;
  if (masks_.size() >= max_cached_masks_) {
    masks_.erase(mask_order_.front());
    mask_order_.pop_front();
  }
  masks_.emplace(config, mask);
  mask_order_.push_back(config);
  return mask;
}

std::shared_ptr<const TokenMask> TokenAutomaton::Walk(int32_t config) {
  const Vocabulary& v = *vocab_;
  auto mask = std::make_shared<TokenMask>(static_cast<size_t>(v.mask_words()), 0);
  uint64_t* bits = mask->data();
  if (pda_.accepting(config) && v.eos_id() >= 0 && v.eos_id() < v.size()) {
    bits[v.eos_id() >> 6] |= uint64_t{1} << (v.eos_id() & 63);
  }
  if (!pda_.can_continue(config)) return mask;
  walk_states_.assign(static_cast<size_t>(v.max_depth()) + 1, Pda::kDead);
  walk_states_[0] = config;
  const std::vector<int32_t>& ids = v.token_ids();
  const int32_t n = v.num_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t parent_state = walk_states_[v.node_depth(i) - 1];
    const int32_t s = pda_.Next(parent_state, v.node_byte(i));
    if (s == Pda::kDead) {
      i = v.subtree_end(i);
      continue;
    }
    walk_states_[v.node_depth(i)] = s;
    for (int32_t t = v.token_begin(i); t < v.token_begin(i + 1); ++t) {
      const int32_t id = ids[t];
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  return mask;
}

}  // namespace dsinfer::structured
