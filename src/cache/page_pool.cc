#include "cache/page_pool.h"

#include "base/check.h"

namespace dsinfer::cache {

PagePool::PagePool(std::string name, int64_t num_pages, int64_t page_bytes)
    : name_(std::move(name)), num_pages_(num_pages), page_bytes_(page_bytes) {
  DSINFER_CHECK(num_pages >= 0 && num_pages < (int64_t{1} << 31) && page_bytes % 4 == 0);
  // new float[] leaves the memory untouched: the OS backs a page only once a request writes it.
  memory_.reset(new float[static_cast<size_t>(num_pages * (page_bytes / 4))]);
  free_.reserve(static_cast<size_t>(num_pages));
  refs_.assign(static_cast<size_t>(num_pages), 0);
  for (int64_t i = num_pages - 1; i >= 0; --i) free_.push_back(static_cast<int32_t>(i));
}

bool PagePool::Allocate(int64_t n, std::vector<int32_t>* table) {
  if (n > free_pages()) return false;
  for (int64_t i = 0; i < n; ++i) {
    table->push_back(free_.back());
    refs_[static_cast<size_t>(free_.back())] = 1;
    free_.pop_back();
  }
  return true;
}

void PagePool::Release(std::vector<int32_t>* table) {
  for (int32_t page : *table) Unref(page);
  table->clear();
}

void PagePool::Retain(int32_t page) {
  DSINFER_CHECK(page >= 0 && page < num_pages_);
  int32_t& refs = refs_[static_cast<size_t>(page)];
  DSINFER_CHECK_MSG(refs > 0, "retaining a free page");
  if (++refs == 2) ++shared_;
}

void PagePool::Unref(int32_t page) {
  DSINFER_CHECK(page >= 0 && page < num_pages_);
  int32_t& refs = refs_[static_cast<size_t>(page)];
  DSINFER_CHECK_MSG(refs > 0, "releasing a free page");
  if (--refs == 1) --shared_;
  if (refs == 0) free_.push_back(page);
  DSINFER_CHECK(free_pages() <= num_pages_);
}

}  // namespace dsinfer::cache
