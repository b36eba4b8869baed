// HostTier: the accounting of the prefix cache's host-memory tier. Cached states evicted from state
// memory are copied to host memory (ModelRunner::Offload) instead of being dropped, and restored
// from there on a hit; this class keeps which ones are there, their bytes and their
// least-recently-used order within the tier, under a byte budget. Bookkeeping only: the engine
// holds the copies and drops those Insert evicts. Not thread-safe: the engine thread's.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace dsinfer::cache {

class HostTier {
 public:
  explicit HostTier(int64_t budget_bytes) : budget_(budget_bytes) {}

  int64_t budget_bytes() const { return budget_; }
  int64_t bytes_used() const { return used_; }
  size_t size() const { return entries_.size(); }
  bool Contains(uint64_t id) const { return entries_.count(id) > 0; }
  int64_t BytesOf(uint64_t id) const;  // 0 when not held

  // Records state `id` (new) of `bytes` as the most recently used. To make room, the least
  // recently used states other than `keep` are evicted first: their ids are returned (oldest
  // first), already erased here, for the caller to drop. nullopt, with nothing changed, when it
  // cannot fit: larger than the budget, or only `keep` stands in the way.
  std::optional<std::vector<uint64_t>> Insert(uint64_t id, int64_t bytes, uint64_t keep = 0);
  // Marks `id` (held) used now.
  void Touch(uint64_t id);
  // Forgets `id`; no-op when not held.
  void Erase(uint64_t id);
  // Held ids, least recently used first.
  std::vector<uint64_t> Ids() const { return {lru_.begin(), lru_.end()}; }

 private:
  struct Entry {
    std::list<uint64_t>::iterator at;  // in lru_
    int64_t bytes = 0;
  };
  int64_t budget_;
  int64_t used_ = 0;
  std::list<uint64_t> lru_;  // least recently used first
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace dsinfer::cache
