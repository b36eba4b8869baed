// PagePool: a fixed number of equal pages of one state component, handed out by id from a free
// list, and the memory behind them (one host allocation, touched only as pages are used). A
// request's pages form its page table for that component; the model's SequenceState reads and
// writes its rows through them. Not thread-safe: owned by StateCache.
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

  // Appends `n` page ids to `table`; false (and nothing changes) when fewer than `n` are free.
  bool Allocate(int64_t n, std::vector<int32_t>* table);
  // Returns every page of `table` and clears it.
  void Release(std::vector<int32_t>* table);
  // The memory of page `page` (page_bytes() bytes).
  float* PageData(int32_t page) const { return memory_.get() + page * (page_bytes_ / 4); }

 private:
  std::string name_;
  int64_t num_pages_;
  int64_t page_bytes_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::unique_ptr<float[]> memory_;  // num_pages * page_bytes, uninitialized
};

}  // namespace dsinfer::cache
