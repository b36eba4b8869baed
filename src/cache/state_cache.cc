#include "cache/state_cache.h"

#include <unordered_set>

#include "base/check.h"

namespace dsinfer::cache {

StateCache::StateCache(MemoryPlan plan) : plan_(std::move(plan)) {
  for (const auto& p : plan_.pools) pools_.emplace_back(p.component.name, p.num_pages, p.page_bytes());
}

std::vector<int64_t> StateCache::Missing(uint64_t id, int64_t length) const {
  auto it = entries_.find(id);
  std::vector<int64_t> missing(pools_.size());
  for (size_t i = 0; i < pools_.size(); ++i) {
    const int64_t have = it == entries_.end() ? 0 : static_cast<int64_t>(it->second.tables[i].size());
    missing[i] = std::max<int64_t>(0, plan_.pools[i].PagesAt(length) - have);
  }
  return missing;
}

bool StateCache::CanReserve(uint64_t id, int64_t length, uint64_t share_from,
                            int64_t shared_length) const {
  const auto missing = Missing(id, length);
  const bool shares = share_from != 0 && !entries_.count(id) && entries_.count(share_from) > 0;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const int64_t shared = shares ? std::min(SharedPages(i, shared_length), missing[i]) : 0;
    if (missing[i] - shared > pools_[i].free_pages()) return false;
  }
  return true;
}

int64_t StateCache::SharedPages(size_t pool, int64_t shared_length) const {
  const PoolPlan& p = plan_.pools[pool];
  const StateKind kind = p.component.kind;
  if (p.component.ring() || (kind != StateKind::kCompressed && kind != StateKind::kIndexKeys) ||
      shared_length <= 0)
    return 0;
  return p.component.Rows(shared_length) / p.rows_per_page;
}

void StateCache::Share(uint64_t from, uint64_t to, int64_t shared_length) {
  DSINFER_CHECK(from != to && !entries_.count(to));
  const Entry& src = entries_.at(from);
  Entry& e = entries_[to];
  e.tables.resize(pools_.size());
  for (size_t i = 0; i < pools_.size(); ++i) {
    const int64_t n = std::min<int64_t>(SharedPages(i, shared_length),
                                        static_cast<int64_t>(src.tables[i].size()));
    for (int64_t k = 0; k < n; ++k) {
      pools_[i].Retain(src.tables[i][k]);
      e.tables[i].push_back(src.tables[i][k]);
    }
  }
}

StatusOr<std::vector<PageCopy>> StateCache::Unshare(uint64_t id, int64_t length) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::vector<PageCopy>{};
  Entry& e = it->second;
  // The first page holding a row at or past `length` tokens, per pool, and how many are shared.
  std::vector<int64_t> first(pools_.size()), needed(pools_.size());
  for (size_t i = 0; i < pools_.size(); ++i) {
    const PoolPlan& p = plan_.pools[i];
    first[i] =
        p.component.ring() ? 0 : p.component.Rows(std::max<int64_t>(0, length)) / p.rows_per_page;
    for (size_t k = static_cast<size_t>(first[i]); k < e.tables[i].size(); ++k) {
      needed[i] += pools_[i].refs(e.tables[i][k]) > 1 ? 1 : 0;
    }
    if (needed[i] > pools_[i].free_pages()) {
      return ResourceExhausted("state cache: no page to unshare request " + std::to_string(id) +
                               "'s rows in " + pools_[i].name());
    }
  }
  std::vector<PageCopy> copies;
  for (size_t i = 0; i < pools_.size(); ++i) {
    for (size_t k = static_cast<size_t>(first[i]); k < e.tables[i].size(); ++k) {
      int32_t& page = e.tables[i][k];
      if (pools_[i].refs(page) <= 1) continue;
      std::vector<int32_t> fresh;
      DSINFER_CHECK(pools_[i].Allocate(1, &fresh));
      copies.push_back({i, page, fresh[0]});
      pools_[i].Unref(page);
      page = fresh[0];
    }
  }
  return copies;
}

bool StateCache::IsShared(uint64_t id, size_t pool, int64_t index) const {
  const auto& table = PageTable(id, pool);
  DSINFER_CHECK(index >= 0 && index < static_cast<int64_t>(table.size()));
  return pools_[pool].refs(table[static_cast<size_t>(index)]) > 1;
}

bool StateCache::FitsAlone(int64_t length) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (plan_.pools[i].PagesAt(length) > pools_[i].num_pages()) return false;
  }
  return true;
}

Status StateCache::Reserve(uint64_t id, int64_t length) {
  if (!CanReserve(id, length)) {
    return ResourceExhausted("state cache: no room for request " + std::to_string(id) + " at " +
                             std::to_string(length) + " tokens");
  }
  const auto missing = Missing(id, length);
  Entry& e = entries_[id];
  e.tables.resize(pools_.size());
  for (size_t i = 0; i < pools_.size(); ++i) {
    DSINFER_CHECK(pools_[i].Allocate(missing[i], &e.tables[i]));
  }
  e.length = std::max(e.length, length);
  return Status::Ok();
}

void StateCache::Free(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  for (size_t i = 0; i < pools_.size(); ++i) pools_[i].Release(&it->second.tables[i]);
  entries_.erase(it);
}

void StateCache::Rename(uint64_t from, uint64_t to) {
  DSINFER_CHECK(!entries_.count(to));
  auto node = entries_.extract(from);
  DSINFER_CHECK(!node.empty());
  node.key() = to;
  if (node.mapped().pages) node.mapped().pages->set_id(to);
  entries_.insert(std::move(node));
}

int64_t StateCache::RequestPages::rows_per_page(int component) const {
  return cache_->plan_.pools[component].rows_per_page;
}

float* StateCache::RequestPages::Page(int component, int64_t index) {
  const auto& table = cache_->entries_.at(id_).tables[component];
  DSINFER_CHECK_MSG(index < static_cast<int64_t>(table.size()), "row beyond the reserved length");
  return cache_->pools_[component].PageData(table[index]);
}

StatePages* StateCache::Pages(uint64_t id) {
  Entry& e = entries_.at(id);
  if (!e.pages) e.pages = std::make_unique<RequestPages>(this, id);
  return e.pages.get();
}

int64_t StateCache::reserved_length(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.length;
}

int64_t StateCache::BytesOf(uint64_t id) const {
  auto it = entries_.find(id);
  if (it == entries_.end()) return 0;
  int64_t bytes = 0;
  for (size_t p = 0; p < plan_.pools.size(); ++p) {
    bytes += static_cast<int64_t>(it->second.tables[p].size()) * plan_.pools[p].page_bytes();
  }
  return bytes;
}

int64_t StateCache::BytesOf(const std::vector<uint64_t>& ids) const {
  int64_t bytes = 0;
  for (size_t p = 0; p < pools_.size(); ++p) {
    std::unordered_set<int32_t> seen;
    for (uint64_t id : ids) {
      auto it = entries_.find(id);
      if (it == entries_.end()) continue;
      for (int32_t page : it->second.tables[p]) {
        if (seen.insert(page).second) bytes += plan_.pools[p].page_bytes();
      }
    }
  }
  return bytes;
}

const std::vector<int32_t>& StateCache::PageTable(uint64_t id, size_t pool) const {
  auto it = entries_.find(id);
  DSINFER_CHECK(it != entries_.end() && pool < pools_.size());
  return it->second.tables[pool];
}

CacheStats StateCache::Stats() const {
  CacheStats s;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const auto& pool = pools_[i];
    int64_t refs = 0;
    for (const auto& [id, e] : entries_) refs += static_cast<int64_t>(e.tables[i].size());
    s.pools.push_back({pool.name(), plan_.pools[i].component.kind, pool.num_pages(),
                       pool.used_pages(), pool.shared_pages(), refs, pool.page_bytes()});
    s.bytes_total += pool.num_pages() * pool.page_bytes();
    s.bytes_used += pool.used_pages() * pool.page_bytes();
    s.bytes_referenced += refs * pool.page_bytes();
  }
  s.requests = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace dsinfer::cache
