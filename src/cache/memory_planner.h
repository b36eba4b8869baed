// MemoryPlanner: splits a byte budget for request state into one PagePool per StateLayout
// component. Ring components (fixed per request) get pages for `max_sequences` requests, where
// max_sequences is capped so that that many requests of `typical_length` tokens fit; the rest of
// the budget goes to the growing components in proportion to their bytes per token, so that they
// run out at the same total token count. A ring's page is the whole ring (it is allocated at
// once); a growing component's page covers at most `page_tokens` tokens — the largest power of
// two of rows that does — so that with power-of-two rates every 128-token boundary is a page
// boundary (prefix pages can later be shared at that granularity; device kernels index a list's
// pages by a shift). Pure function; the plan is a value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/state_layout.h"

namespace dsinfer::cache {

struct PlanOptions {
  int64_t budget_bytes = int64_t{1} << 30;
  int max_sequences = 64;         // upper bound on concurrently held requests
  int64_t typical_length = 2048;  // tokens per request the split assumes
  int64_t page_tokens = 128;
  int64_t rows_per_page = 0;  // > 0: every growing component pages by this many rows instead
};

// The rows of a growing component's page under `o` (PlanMemory's rule).
int64_t GrowingRowsPerPage(const StateComponent& component, const PlanOptions& o);

struct PoolPlan {
  StateComponent component;
  int64_t rows_per_page = 16;
  int64_t num_pages = 0;
  int64_t page_bytes() const { return rows_per_page * component.bytes_per_row; }
  // Pages one request holds at `length` tokens.
  int64_t PagesAt(int64_t length) const {
    return (component.Rows(length) + rows_per_page - 1) / rows_per_page;
  }
};

struct MemoryPlan {
  std::vector<PoolPlan> pools;
  int max_sequences = 0;       // requests the ring pools can hold at once
  int64_t token_capacity = 0;  // tokens the growing pools hold (all requests); INT64_MAX if none
  int64_t planned_bytes = 0;   // <= the budget
  std::string Describe() const;
};

// ResourceExhausted when the budget cannot hold one request of a few pages.
StatusOr<MemoryPlan> PlanMemory(const StateLayout& layout, const PlanOptions& options);

}  // namespace dsinfer::cache
