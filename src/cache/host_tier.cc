#include "cache/host_tier.h"

#include "base/check.h"

namespace dsinfer::cache {

int64_t HostTier::BytesOf(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.bytes;
}

std::optional<std::vector<uint64_t>> HostTier::Insert(uint64_t id, int64_t bytes, uint64_t keep) {
  DSINFER_CHECK(bytes >= 0 && !entries_.count(id));
  if (bytes > budget_) return std::nullopt;
  // The victims, oldest first, until the state fits; nothing is evicted unless it then fits.
  std::vector<uint64_t> victims;
  int64_t freed = 0;
  for (auto it = lru_.begin(); it != lru_.end() && used_ - freed + bytes > budget_; ++it) {
    if (*it == keep) continue;
    victims.push_back(*it);
    freed += entries_.at(*it).bytes;
  }
  if (used_ - freed + bytes > budget_) return std::nullopt;
  for (uint64_t v : victims) Erase(v);
  lru_.push_back(id);
  entries_[id] = {std::prev(lru_.end()), bytes};
  used_ += bytes;
  return victims;
}

void HostTier::Touch(uint64_t id) {
  Entry& e = entries_.at(id);
  lru_.splice(lru_.end(), lru_, e.at);
}

void HostTier::Erase(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  used_ -= it->second.bytes;
  lru_.erase(it->second.at);
  entries_.erase(it);
}

}  // namespace dsinfer::cache
