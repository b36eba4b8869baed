// PagePool: a fixed number of equal pages of one state component, handed out by id from a free
// list, and the memory behind them (one host allocation, touched only as pages are used). A
// request's pages form its page table for that component; the model's SequenceState reads and
// writes its rows through them. A page is reference-counted: the page tables of several requests
// may hold it (copy-on-write sharing of append-only rows, StateCache::Share), and it returns to
// the free list when its last holder releases it. Not thread-safe: owned by StateCache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsinfer::cache {

class PagePool {
 public:
  PagePool(std::string name, int64_t num_pages, int64_t page_bytes);

  const std::string& name() const { return name_; }
  int64_t num_pages() const { return num_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_pages() const { return num_pages_ - free_pages(); }
  int64_t page_bytes() const { return page_bytes_; }

  // Appends `n` page ids to `table`, each held once; false (and nothing changes) when fewer than
  // `n` are free.
  bool Allocate(int64_t n, std::vector<int32_t>* table);
  // Drops `table`'s hold on each of its pages (a page is free once nothing holds it) and clears it.
  void Release(std::vector<int32_t>* table);
  // One more holder of used page `page`.
  void Retain(int32_t page);
  // Drops one hold on used page `page`.
  void Unref(int32_t page);
  // How many page tables hold `page` (0: free).
  int32_t refs(int32_t page) const { return refs_[static_cast<size_t>(page)]; }
  // Used pages held by more than one table.
  int64_t shared_pages() const { return shared_; }
  // The memory of page `page` (page_bytes() bytes).
  float* PageData(int32_t page) const { return memory_.get() + page * (page_bytes_ / 4); }

 private:
  std::string name_;
  int64_t num_pages_;
  int64_t page_bytes_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::vector<int32_t> refs_;  // per page: its holders
  int64_t shared_ = 0;         // pages with refs_ > 1
  std::unique_ptr<float[]> memory_;  // num_pages * page_bytes, uninitialized
};

}  // namespace dsinfer::cache
