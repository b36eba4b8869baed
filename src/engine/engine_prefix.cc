// EngineCore's prefix cache (engine_core.h): the states it checkpoints after steps and keeps for
// finished sequences, their eviction, and clearing it.
#include "base/check.h"
#include "engine/engine_core.h"

namespace dsinfer::engine {

using scheduler::SeqId;

void EngineCore::CheckpointStep(const scheduler::BatchPlan& plan, bool verified) {
  for (const auto& ch : plan.chunks) {
    if ((ch.drafts > 0) != verified || !scheduler_->Contains(ch.id)) continue;
    const int64_t length = scheduler_->computed(ch.id);
    const RequestState& r = requests_.at(ch.id >> 8);
    const bool prompt_end =
        length == static_cast<int64_t>(r.req.prompt.size()) && (ch.id & 0xff) == 0;
    if (length > 0 && (length % checkpoint_interval_ == 0 || prompt_end)) Checkpoint(ch.id, length);
  }
}

void EngineCore::Checkpoint(SeqId seq, int64_t length) {
  const std::vector<int32_t>& tokens = scheduler_->tokens(seq);
  if (length <= 0 || prefix_->Contains(tokens, length)) return;
  while (prefix_->size() >= max_checkpoints_) {
    if (!EvictCheckpoint(/*copies_only=*/true)) return;
  }
  const SeqId id = kCheckpointBit | ++next_checkpoint_;
  // Room from older copies only: a copy is never stored at the cost of a running request or of a
  // finished completion's state (a chat's next turn wants that one).
  while (!cache_->Reserve(id, length).ok()) {
    if (!EvictCheckpoint(/*copies_only=*/true)) return;
  }
  runner_->Fork(seq, id);
  prefix_->Insert(id, tokens, length);
  ++stats_.prefix_checkpoints;
}

void EngineCore::KeepFinished(SeqId seq, int64_t length) {
  const std::vector<int32_t>& tokens = scheduler_->tokens(seq);
  if (length <= 0 || prefix_->Contains(tokens, length)) return;
  while (prefix_->size() >= max_checkpoints_) {
    if (!EvictCheckpoint()) return;
  }
  const SeqId id = kCheckpointBit | ++next_checkpoint_;
  cache_->Rename(seq, id);  // the scheduler's and runner's release of `seq` then finds nothing
  runner_->Rename(seq, id);
  prefix_->Insert(id, tokens, length);
  movable_.insert(id);
  ++stats_.prefix_checkpoints;
}

bool EngineCore::EvictCheckpoint(bool copies_only) {
  const auto id = !prefix_      ? std::nullopt
                  : copies_only ? prefix_->LeastRecentlyUsed(
                                      probed_, [this](uint64_t k) { return movable_.count(k) > 0; })
                                : prefix_->LeastRecentlyUsed(probed_);
  if (!id) return false;
  movable_.erase(*id);
  prefix_->Erase(*id);
  cache_->Free(*id);
  runner_->Release(*id);
  ++stats_.prefix_evictions;
  return true;
}

void EngineCore::ClearPrefixCache() {
  if (!prefix_) return;
  probed_ = 0;
  movable_.clear();
  for (SeqId id : prefix_->Ids()) {
    prefix_->Erase(id);
    cache_->Free(id);
    runner_->Release(id);
  }
}

}  // namespace dsinfer::engine
