#include "cache/state_cache.h"

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

bool StateCache::CanReserve(uint64_t id, int64_t length) const {
  const auto missing = Missing(id, length);
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (missing[i] > pools_[i].free_pages()) return false;
  }
  return true;
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

const std::vector<int32_t>& StateCache::PageTable(uint64_t id, size_t pool) const {
  auto it = entries_.find(id);
  DSINFER_CHECK(it != entries_.end() && pool < pools_.size());
  return it->second.tables[pool];
}

CacheStats StateCache::Stats() const {
  CacheStats s;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const auto& pool = pools_[i];
    s.pools.push_back({pool.name(), plan_.pools[i].component.kind, pool.num_pages(), pool.used_pages(),
                       pool.page_bytes()});
    s.bytes_total += pool.num_pages() * pool.page_bytes();
    s.bytes_used += pool.used_pages() * pool.page_bytes();
  }
  s.requests = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace dsinfer::cache
