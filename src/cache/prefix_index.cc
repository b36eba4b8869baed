#include "cache/prefix_index.h"

#include <algorithm>

namespace dsinfer::cache {

namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace

uint64_t PrefixIndex::BlockKey(const std::vector<int32_t>& tokens, int64_t blocks) const {
  return BlockKeys(tokens, blocks).back();
}

std::vector<uint64_t> PrefixIndex::BlockKeys(const std::vector<int32_t>& tokens,
                                             int64_t blocks) const {
  std::vector<uint64_t> keys(static_cast<size_t>(blocks + 1));
  uint64_t h = salt_;
  keys[0] = Mix(h, 0);
  for (int64_t b = 1; b <= blocks; ++b) {
    for (int64_t i = (b - 1) * kBlock; i < b * kBlock; ++i)
      h = Mix(h, static_cast<uint32_t>(tokens[i]));
    keys[b] = Mix(h, static_cast<uint64_t>(b));
  }
  return keys;
}

std::optional<PrefixIndex::Hit> PrefixIndex::Lookup(const std::vector<int32_t>& tokens,
                                                    int64_t max_length) {
  max_length = std::min<int64_t>(max_length, static_cast<int64_t>(tokens.size()));
  if (max_length <= 0 || entries_.empty()) return std::nullopt;
  // The hash chain of every whole block, then candidates from the longest block count down.
  const int64_t blocks = max_length / kBlock;
  const std::vector<uint64_t> keys = BlockKeys(tokens, blocks);
  for (int64_t b = blocks; b >= 0; --b) {
    const auto range = by_key_.equal_range(keys[b]);
    const Entry* best = nullptr;
    uint64_t best_id = 0;
    for (auto it = range.first; it != range.second; ++it) {
      const Entry& e = entries_.at(it->second);
      const auto len = static_cast<int64_t>(e.tokens.size());
      if (len > max_length || len / kBlock != b ||
          (best && len <= static_cast<int64_t>(best->tokens.size())))
        continue;
      if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) continue;
      best = &e;
      best_id = it->second;
    }
    if (best) {
      entries_.at(best_id).last_used = ++clock_;
      return Hit{best_id, static_cast<int64_t>(best->tokens.size())};
    }
  }
  return std::nullopt;
}

bool PrefixIndex::Contains(const std::vector<int32_t>& tokens, int64_t length) const {
  if (length > static_cast<int64_t>(tokens.size())) return false;
  const auto range = by_key_.equal_range(BlockKey(tokens, length / kBlock));
  for (auto it = range.first; it != range.second; ++it) {
    const Entry& e = entries_.at(it->second);
    if (static_cast<int64_t>(e.tokens.size()) == length &&
        std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) {
      return true;
    }
  }
  return false;
}

void PrefixIndex::Insert(uint64_t id, const std::vector<int32_t>& tokens, int64_t length) {
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.begin() + length);
  e.key = BlockKey(tokens, length / kBlock);
  e.last_used = ++clock_;
  by_key_.emplace(e.key, id);
  entries_[id] = std::move(e);
}

std::optional<uint64_t> PrefixIndex::LeastRecentlyUsed(
    uint64_t keep, const std::function<bool(uint64_t)>& skip) const {
  std::optional<uint64_t> id;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [k, e] : entries_) {
    if (k != keep && e.last_used < oldest && !(skip && skip(k))) {
      oldest = e.last_used;
      id = k;
    }
  }
  return id;
}

void PrefixIndex::Erase(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  const auto range = by_key_.equal_range(it->second.key);
  for (auto k = range.first; k != range.second; ++k) {
    if (k->second == id) {
      by_key_.erase(k);
      break;
    }
  }
  entries_.erase(it);
}

std::vector<uint64_t> PrefixIndex::Ids() const {
  std::vector<uint64_t> ids;
  for (const auto& [k, e] : entries_) ids.push_back(k);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace dsinfer::cache
