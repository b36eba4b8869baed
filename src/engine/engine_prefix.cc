// EngineCore's prefix cache (engine_core.h): the scheduler's hooks into it (lookup, restore,
// move, reclaim, preemption), the states it checkpoints after steps and keeps for finished and
// preempted sequences, their eviction from state memory to the host tier (or out), and clearing
// it.
#include "base/check.h"
#include "engine/engine_core.h"

namespace dsinfer::engine {

using scheduler::SeqId;

void EngineCore::StartPrefixCache(const EngineOptions& o, size_t max_checkpoints) {
  // The key's salt: the model (dir or preset) and the chat dialect.
  const std::string identity =
      (o.random_preset.empty() ? o.model_dir : "preset:" + o.random_preset) + "|" +
      std::to_string(static_cast<int>(codec_->dialect()));
  prefix_ = std::make_unique<cache::PrefixIndex>(std::hash<std::string>{}(identity));
  checkpoint_interval_ = o.prefix_checkpoint_interval;
  max_checkpoints_ = max_checkpoints;
  if (o.host_cache_bytes > 0) host_ = std::make_unique<cache::HostTier>(o.host_cache_bytes);
  EngineCore* c = this;
  scheduler::SchedulerHooks hooks;
  hooks.probe = [c](SeqId id, const std::vector<int32_t>& tokens, int64_t max_length) -> int64_t {
    // A prompt still to be scored (prompt_logprobs) is computed in full.
    if (auto it = c->requests_.find(id >> 8); it != c->requests_.end()) {
      const RequestState& r = it->second;
      if (r.req.params.prompt_logprobs >= 0 &&
          r.scored + 1 < static_cast<int64_t>(r.req.prompt.size()))
        return 0;
    }
    ++c->stats_.prefix_queries;
    const auto hit = c->prefix_->Lookup(tokens, max_length);
    c->probed_ = hit ? hit->id : 0;
    return hit ? hit->length : 0;
  };
  hooks.restore = [c](SeqId id, int64_t length) {
    const SeqId from = c->probed_;
    DSINFER_CHECK(from != 0);
    if (auto it = c->host_states_.find(from); it != c->host_states_.end()) {
      // From the host tier: a kept state moves (it is dropped there), a copy stays for more.
      DSINFER_CHECK(it->second->length() == length);
      DSINFER_CHECK(c->cache_->Reserve(id, length).ok());  // admission counted it
      const Status restored = c->runner_->Restore(*it->second, id);
      DSINFER_CHECK_MSG(restored.ok(), restored.ToString().c_str());
      ++c->stats_.host_cache_restores;
      if (c->movable_.count(from)) {
        c->DropCached(from);
      } else {
        c->host_->Touch(from);
      }
    } else {
      // A state in state memory: its final list pages are shared, the rest copied.
      const int64_t shared = c->SharedLength(from, length);
      if (shared > 0) c->cache_->Share(from, id, shared);
      DSINFER_CHECK(c->cache_->Reserve(id, length).ok());  // admission counted it
      c->runner_->Fork(from, id);
    }
    c->probed_ = 0;
    ++c->stats_.prefix_hits;
    c->stats_.prefix_tokens_reused += length;
  };
  hooks.shares = [c]() -> std::pair<uint64_t, int64_t> {
    const SeqId from = c->probed_;
    if (from == 0 || c->host_states_.count(from)) return {0, 0};
    return {from, c->SharedLength(from, static_cast<int64_t>(c->prefix_->tokens(from).size()))};
  };
  hooks.unprobe = [c] { c->probed_ = 0; };
  hooks.take = [c](SeqId id) {
    if (c->probed_ == 0 || !c->movable_.count(c->probed_) || c->host_states_.count(c->probed_))
      return false;
    const SeqId from = c->probed_;
    c->taken_ = {from, c->prefix_->tokens(from)};
    c->prefix_->Erase(from);
    c->movable_.erase(from);
    c->cache_->Rename(from, id);
    c->runner_->Rename(from, id);
    c->probed_ = 0;
    ++c->stats_.prefix_hits;
    c->stats_.prefix_tokens_reused += static_cast<int64_t>(c->taken_.tokens.size());
    return true;
  };
  hooks.untake = [c](SeqId id) {
    const SeqId back = c->taken_.checkpoint;
    c->cache_->Rename(id, back);
    c->runner_->Rename(id, back);
    c->prefix_->Insert(back, c->taken_.tokens, static_cast<int64_t>(c->taken_.tokens.size()));
    c->movable_.insert(back);
    --c->stats_.prefix_hits;
    c->stats_.prefix_tokens_reused -= static_cast<int64_t>(c->taken_.tokens.size());
  };
  hooks.reclaim = [c] { return c->EvictCheckpoint(); };
  if (o.prefix_keep_preempted) {
    hooks.preempt = [c](SeqId id, const std::vector<int32_t>&, int64_t computed) {
      c->KeepPreempted(id, computed);
    };
  }
  scheduler_->set_hooks(std::move(hooks));
}

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
  while (DeviceCheckpoints() >= max_checkpoints_) {
    if (!EvictCheckpoint(/*copies_only=*/true)) return;
  }
  const SeqId id = kCheckpointBit | ++next_checkpoint_;
  // Room from older copies only: a copy is never stored at the cost of a running request or of a
  // finished completion's state (a chat's next turn wants that one), which may only move to the
  // host tier. Its final list pages are the sequence's own (shared); the rest is copied.
  const int64_t shared = SharedLength(seq, length);
  while (!cache_->CanReserve(id, length, seq, shared)) {
    if (!EvictCheckpoint(/*copies_only=*/true)) return;
  }
  if (shared > 0) cache_->Share(seq, id, shared);
  DSINFER_CHECK(cache_->Reserve(id, length).ok());
  runner_->Fork(seq, id);
  prefix_->Insert(id, tokens, length);
  ++stats_.prefix_checkpoints;
}

void EngineCore::KeepFinished(SeqId seq, int64_t length) {
  const std::vector<int32_t>& tokens = scheduler_->tokens(seq);
  if (length <= 0 || prefix_->Contains(tokens, length)) return;
  while (DeviceCheckpoints() >= max_checkpoints_) {
    if (!EvictCheckpoint()) return;
  }
  const SeqId id = kCheckpointBit | ++next_checkpoint_;
  cache_->Rename(seq, id);  // the scheduler's and runner's release of `seq` then finds nothing
  runner_->Rename(seq, id);
  prefix_->Insert(id, tokens, length);
  movable_.insert(id);
  ++stats_.prefix_checkpoints;
}

void EngineCore::KeepPreempted(SeqId seq, int64_t length) {
  const std::vector<int32_t>& tokens = scheduler_->tokens(seq);
  // A prompt still to be scored (prompt_logprobs) is computed in full anyway.
  const RequestState& r = requests_.at(seq >> 8);
  if (r.req.params.prompt_logprobs >= 0 && r.scored + 1 < static_cast<int64_t>(r.req.prompt.size()))
    return;
  // The same state cached already (a checkpoint at this length): its readmission restores that.
  if (length <= 0 || prefix_->Contains(tokens, length)) return;
  while (DeviceCheckpoints() >= max_checkpoints_) {
    if (!EvictCheckpoint()) return;
  }
  // Renamed as it is: the preemption frees nothing yet, and the memory it was for comes from
  // evicting cached states, least recently used first (this one is the newest) — to the host
  // tier, when there is one.
  const SeqId id = kCheckpointBit | ++next_checkpoint_;
  cache_->Rename(seq, id);
  runner_->Rename(seq, id);
  prefix_->Insert(id, tokens, length);
  movable_.insert(id);
  kept_preempted_[seq] = id;
  ++stats_.preempted_states_kept;
}

int64_t EngineCore::SharedLength(SeqId seq, int64_t length) const {
  if (!share_pages_) return 0;
  // Below its committed length a sequence rolls back only when a late grammar mask makes its draw
  // sit out: one token (SitOut; a verify chunk's rollback stays above the chunk's start). A cached
  // state never does, nor a sequence restored from one below the length it restored.
  int64_t rollback = 0;
  if ((seq & kCheckpointBit) == 0 && mask_deadline_.count() > 0) {
    auto it = requests_.find(seq >> 8);
    const size_t index = seq & 0xff;
    if (it != requests_.end() && index < it->second.completions.size() &&
        it->second.completions[index].matcher)
      rollback = 1;
  }
  return std::max<int64_t>(0, runner_->ShareableLength(seq, length) - rollback);
}

bool EngineCore::EvictCheckpoint(bool copies_only) {
  if (!prefix_) return false;
  const auto oldest = [this](bool skip_kept) {
    return prefix_->LeastRecentlyUsed(probed_, [this, skip_kept](uint64_t k) {
      return host_states_.count(k) > 0 || (skip_kept && movable_.count(k) > 0);
    });
  };
  // With a host tier a kept state may make room for a copy too: it moves there, not out.
  auto id = oldest(copies_only && !host_);
  if (id && copies_only && movable_.count(*id)) {
    if (OffloadCheckpoint(*id)) {
      ++stats_.prefix_evictions;
      return true;
    }
    id = oldest(/*skip_kept=*/true);
  }
  if (!id) return false;
  ++stats_.prefix_evictions;
  if (!OffloadCheckpoint(*id)) DropCached(*id);
  return true;
}

bool EngineCore::OffloadCheckpoint(SeqId id) {
  if (!host_) return false;
  auto copied = runner_->Offload(id);
  if (!copied.ok()) return false;
  const int64_t bytes = (*copied)->bytes();
  const auto dropped = host_->Insert(id, bytes, probed_);
  if (!dropped) return false;
  for (SeqId old : *dropped) {
    host_states_.erase(old);
    prefix_->Erase(old);
    movable_.erase(old);
    ++stats_.host_cache_evictions;
  }
  host_states_[id] = std::move(*copied);
  cache_->Free(id);
  runner_->Release(id);
  ++stats_.host_cache_offloads;
  return true;
}

void EngineCore::DropCached(SeqId id) {
  if (!prefix_ || !prefix_->Holds(id)) return;
  if (id == probed_) probed_ = 0;
  prefix_->Erase(id);
  movable_.erase(id);
  if (host_states_.erase(id) > 0) {
    host_->Erase(id);
  } else {
    cache_->Free(id);
    runner_->Release(id);
  }
}

void EngineCore::ClearPrefixCache() {
  if (!prefix_) return;
  probed_ = 0;
  for (SeqId id : prefix_->Ids()) DropCached(id);
  kept_preempted_.clear();
}

}  // namespace dsinfer::engine
