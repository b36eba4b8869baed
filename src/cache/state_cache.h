// StateCache: per-request page tables over the PagePools of a MemoryPlan. A request reserves state
// for a length before the forward that reaches it (Reserve), grows as it generates, and gives
// everything back when it finishes, is aborted or is preempted (Free). Reservations are
// all-or-nothing across pools, so a failed Reserve changes nothing. Stats() is the accounting that
// metrics and tests read. Not thread-safe: owned by the engine thread (through the scheduler).
//
// Copy-on-write sharing: the append-only lists (StateKind kCompressed, kIndexKeys) never change a
// row once written, so a copy of a request's state (n > 1 siblings forked after the prompt, a
// prefix checkpoint and a request restored from it) takes the pages wholly below the copied rows
// from the original instead of new ones (Share): a page then has several holders, counted in its
// pool, and is freed with its last one. Only the rings (window, compressor buffers) and a list's
// partly filled last page are copied. A shared page is never written: the caller shares only rows
// that neither holder writes again (the engine: ModelRunner::ShareableLength less what a rollback
// may rewrite), and a rollback below that anyway unshares first (Unshare: the page is copied).
// Memory counts each page once: a holder's BytesOf is what it references, bytes_used what is in
// use.
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
  int64_t pages_used = 0;    // each page once, however many hold it
  int64_t pages_shared = 0;  // used pages held by more than one request
  int64_t page_refs = 0;     // pages summed over the requests' page tables
  int64_t page_bytes = 0;
};

struct CacheStats {
  std::vector<PoolStats> pools;
  int64_t bytes_total = 0;
  int64_t bytes_used = 0;
  // The bytes of every request's pages summed over requests: bytes_used without sharing.
  int64_t bytes_referenced = 0;
  int64_t requests = 0;  // requests holding state
};

// A page to copy before its holder writes it (StateCache::Unshare): pool `pool`'s page `from` to
// its page `to`, whole.
struct PageCopy {
  size_t pool = 0;
  int32_t from = 0;
  int32_t to = 0;
};

class StateCache {
 public:
  explicit StateCache(MemoryPlan plan);

  const MemoryPlan& plan() const { return plan_; }
  // Whether `id` could be grown (or created) to `length` tokens now; with `share_from` (when `id`
  // holds nothing), after Share(share_from, id, shared_length).
  bool CanReserve(uint64_t id, int64_t length, uint64_t share_from = 0,
                  int64_t shared_length = 0) const;
  // Whether a request of `length` tokens fits in an empty cache (else it can never run).
  bool FitsAlone(int64_t length) const;
  // Grows `id`'s tables to cover `length` tokens (creating them if new). ResourceExhausted, with
  // nothing changed, if some pool is short. Never shrinks.
  Status Reserve(uint64_t id, int64_t length);
  // Releases every page of `id` (no-op if it holds none).
  void Free(uint64_t id);
  // `from`'s pages become `to`'s (which must hold none); its Pages() view follows.
  void Rename(uint64_t from, uint64_t to);
  // Copy-on-write: `to` (which must hold none) becomes a holder of `from`'s append-only list pages
  // that lie wholly below the rows of `shared_length` tokens (a partly filled page is not shared);
  // nothing is allocated: Reserve then adds `to`'s other pages. The rows of those pages must be
  // final in `from` (written, and rewritten by neither).
  void Share(uint64_t from, uint64_t to, int64_t shared_length);
  // Pages of pool `pool` that Share(·, ·, shared_length) shares (0 for a ring).
  int64_t SharedPages(size_t pool, int64_t shared_length) const;
  // Before `id` rewrites its rows from `length` tokens on (a rollback): every page of `id` that
  // holds such rows and is shared is replaced in `id`'s table by a new page; the copies to make
  // (old page onto new, before the write) are returned. ResourceExhausted, with nothing changed,
  // when the pools are short.
  StatusOr<std::vector<PageCopy>> Unshare(uint64_t id, int64_t length);
  // Whether page `index` of `id`'s table of pool `pool` has another holder.
  bool IsShared(uint64_t id, size_t pool, int64_t index) const;

  bool Holds(uint64_t id) const { return entries_.count(id) > 0; }
  int64_t reserved_length(uint64_t id) const;
  int64_t BytesOf(uint64_t id) const;  // the pages `id` holds (shared ones too), in bytes
  // The distinct pages the requests of `ids` hold (a page two of them share counts once), in bytes.
  int64_t BytesOf(const std::vector<uint64_t>& ids) const;
  // The memory of page `page` of pool `pool` (page_bytes of it; the CPU's state lives there).
  float* PageData(size_t pool, int32_t page) const { return pools_[pool].PageData(page); }
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
