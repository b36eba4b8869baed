#include "cache/memory_planner.h"

#include <algorithm>
#include <cstdio>

namespace dsinfer::cache {

std::string MemoryPlan::Describe() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "state memory %.1f MiB: up to %d requests, %lld tokens of context",
                planned_bytes / 1048576.0, max_sequences, static_cast<long long>(token_capacity));
  std::string s = buf;
  for (const auto& p : pools) {
    std::snprintf(buf, sizeof(buf), "; %s %lld x %lld B", p.component.name.c_str(),
                  static_cast<long long>(p.num_pages), static_cast<long long>(p.page_bytes()));
    s += buf;
  }
  return s;
}

int64_t GrowingRowsPerPage(const StateComponent& component, const PlanOptions& o) {
  if (o.rows_per_page > 0) return o.rows_per_page;
  const int64_t most = std::max<int64_t>(1, o.page_tokens / component.tokens_per_row);
  int64_t rows = 1;
  while (rows * 2 <= most) rows *= 2;
  return rows;
}

StatusOr<MemoryPlan> PlanMemory(const StateLayout& layout, const PlanOptions& o) {
  if (o.max_sequences < 1 || o.rows_per_page < 0 || o.page_tokens < 1 || o.typical_length < 1) {
    return InvalidArgument(
        "memory plan: max_sequences, page_tokens and typical_length must be >= 1, rows_per_page "
        ">= 0");
  }
  MemoryPlan plan;
  int64_t fixed = 0, growth_page_min = 0;  // per request: ring bytes; one page of each growing pool
  double per_token = 0;
  for (const auto& comp : layout.components()) {
    // A ring is allocated whole, so its page is the ring; growing lists page by whole tokens.
    PoolPlan p{comp, comp.ring() ? comp.ring_rows : GrowingRowsPerPage(comp, o), 0};
    if (comp.ring()) {
      fixed += p.PagesAt(0) * p.page_bytes();
    } else {
      growth_page_min += p.page_bytes();
      per_token += static_cast<double>(comp.bytes_per_row) / comp.tokens_per_row;
    }
    plan.pools.push_back(p);
  }
  if (o.budget_bytes < fixed + growth_page_min) {
    return ResourceExhausted("state memory budget of " + std::to_string(o.budget_bytes) +
                             " bytes is below one request's minimum of " +
                             std::to_string(fixed + growth_page_min) + " bytes");
  }
  const double typical = static_cast<double>(fixed) + per_token * static_cast<double>(o.typical_length);
  plan.max_sequences = static_cast<int>(std::clamp<double>(
      static_cast<double>(o.budget_bytes) / std::max(typical, 1.0), 1.0, o.max_sequences));
  // Leave room for at least one growing page per pool.
  while (plan.max_sequences > 1 &&
         plan.max_sequences * fixed + growth_page_min > o.budget_bytes) {
    --plan.max_sequences;
  }
  const int64_t rest = o.budget_bytes - plan.max_sequences * fixed;
  plan.token_capacity = INT64_MAX;
  for (auto& p : plan.pools) {
    if (p.component.ring()) {
      p.num_pages = plan.max_sequences * p.PagesAt(0);
    } else {
      const double share = static_cast<double>(p.component.bytes_per_row) / p.component.tokens_per_row /
                           per_token;
      p.num_pages = std::max<int64_t>(1, static_cast<int64_t>(rest * share / p.page_bytes()));
      plan.token_capacity = std::min(plan.token_capacity,
                                     p.num_pages * p.rows_per_page * p.component.tokens_per_row);
    }
    plan.planned_bytes += p.num_pages * p.page_bytes();
  }
  return plan;
}

}  // namespace dsinfer::cache
