// StateCache: per-request page tables over the PagePools of a MemoryPlan. A request reserves state
// for a length before the forward that reaches it (Reserve), grows as it generates, and gives
// everything back when it finishes, is aborted or is preempted (Free). Reservations are
// all-or-nothing across pools, so a failed Reserve changes nothing. Stats() is the accounting that
// metrics and tests read. Not thread-safe: owned by the engine thread (through the scheduler).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "cache/memory_planner.h"
#include "cache/page_pool.h"
#include "cache/state_pages.h"

namespace dsinfer::cache {

struct PoolStats {
  std::string name;
  StateKind kind = StateKind::kWindow;
  int64_t pages_total = 0;
  int64_t pages_used = 0;
  int64_t page_bytes = 0;
};

struct CacheStats {
  std::vector<PoolStats> pools;
  int64_t bytes_total = 0;
  int64_t bytes_used = 0;
  int64_t requests = 0;  // requests holding state
};

class StateCache {
 public:
  explicit StateCache(MemoryPlan plan);

  const MemoryPlan& plan() const { return plan_; }
  // Whether `id` could be grown (or created) to `length` tokens now.
  bool CanReserve(uint64_t id, int64_t length) const;
  // Whether a request of `length` tokens fits in an empty cache (else it can never run).
  bool FitsAlone(int64_t length) const;
  // Grows `id`'s tables to cover `length` tokens (creating them if new). ResourceExhausted, with
  // nothing changed, if some pool is short. Never shrinks.
  Status Reserve(uint64_t id, int64_t length);
  // Releases every page of `id` (no-op if it holds none).
  void Free(uint64_t id);
  // `from`'s pages become `to`'s (which must hold none); its Pages() view follows.
  void Rename(uint64_t from, uint64_t to);

  bool Holds(uint64_t id) const { return entries_.count(id) > 0; }
  int64_t reserved_length(uint64_t id) const;
  int64_t BytesOf(uint64_t id) const;  // the pages `id` holds, in bytes
  // Page ids of `id` in pool `pool` (index into plan().pools).
  const std::vector<int32_t>& PageTable(uint64_t id, size_t pool) const;
  // The pages of `id` as the model's SequenceState addresses them; valid while `id` holds state
  // (until Free). Rows beyond the reserved length must not be touched.
  StatePages* Pages(uint64_t id);
  CacheStats Stats() const;

 private:
  // A request's view of its pages for the model.
  class RequestPages : public StatePages {
   public:
    RequestPages(StateCache* cache, uint64_t id) : cache_(cache), id_(id) {}
    int64_t rows_per_page(int component) const override;
    float* Page(int component, int64_t index) override;
    void set_id(uint64_t id) { id_ = id; }

   private:
    StateCache* cache_;
    uint64_t id_;
  };
  struct Entry {
    int64_t length = 0;
    std::vector<std::vector<int32_t>> tables;  // [pool] -> page ids
    std::unique_ptr<RequestPages> pages;
  };
  // Extra pages per pool that `id` needs to reach `length`.
  std::vector<int64_t> Missing(uint64_t id, int64_t length) const;

  MemoryPlan plan_;
  std::vector<PagePool> pools_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace dsinfer::cache
