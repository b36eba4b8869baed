// BatchPlan: the scheduler's decision for one engine step: which sequences run which of their
// tokens, and which lost their state. Plain value type.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::scheduler {

using SeqId = uint64_t;

// Overlap scheduling: a token drawn by a step still in flight, appended to its sequence before its
// id is known (Scheduler::SetToken fills it in).
inline constexpr int32_t kPendingToken = -1;

struct ScheduledChunk {
  SeqId id = 0;
  int64_t start = 0;     // first token index (= tokens whose state exists); 0: a fresh state
  int64_t count = 0;     // tokens to run
  bool samples = false;  // the chunk reaches the last known token: its last row yields a new token
  // Speculative verification: the chunk's last `drafts` tokens are draft tokens (Scheduler::drafts)
  // after the sequence's last known token; each of its last drafts + 1 rows yields a token.
  int64_t drafts = 0;
};

struct BatchPlan {
  std::vector<ScheduledChunk> chunks;  // each sequence at most once, in scheduling order
  // State given up this step (kept as a cached state, or dropped): restored or recomputed when
  // they are readmitted.
  std::vector<SeqId> preempted;
  int64_t num_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

}  // namespace dsinfer::scheduler
