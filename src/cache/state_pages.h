// StatePages: the pages a request's state lives in, as the model addresses them. Page `index` of
// component `c` (StateLayout order) holds rows [index * rows_per_page(c), ...) of every member of
// c. Implemented by the state cache (pages of its pools) and by private heap pages
// (model/deepseek_v4/state.h). Not thread-safe.
#pragma once

#include <cstdint>

namespace dsinfer::cache {

class StatePages {
 public:
  virtual ~StatePages() = default;
  virtual int64_t rows_per_page(int component) const = 0;
  // The page; for the cache it must have been reserved, heap pages are created on first use.
  virtual float* Page(int component, int64_t index) = 0;
};

}  // namespace dsinfer::cache
