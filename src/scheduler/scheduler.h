// Scheduler: continuous batching over sequences (one per completion), plain CPU code.
//  * Each step has a token budget. Running sequences go first, in (priority, arrival) order: one
//    token for a decode, as much of the remaining prompt as fits for a prefill (chunked prefill).
//    Waiting sequences are then admitted in (effective priority, arrival) order while budget,
//    `max_running` and state memory allow; admission stops at the first that does not fit, so a
//    large request is never overtaken forever (FCFS within a priority).
//  * Priorities: lower values run first; a waiting sequence's effective priority improves by one
//    level every `aging_steps` steps, so low priorities are not starved.
//  * Memory: every chunk first reserves its state in the StateCache. When a running sequence
//    cannot grow, the lowest-priority, latest running sequence that is not yet scheduled this step
//    is preempted — possibly the sequence itself. Its state may be kept as a cached state
//    (SchedulerHooks::preempt) and restored when it is readmitted; else it recomputes its prompt
//    and outputs from the longest cached state of its tokens. Cached prefix states are dropped
//    first (SchedulerHooks::reclaim).
//  * Prefix cache (SchedulerHooks): an admitted sequence starts from the longest cached state of
//    its tokens (probe, restore) and prefills only the rest; prefill chunks end at checkpoint
//    positions so that the engine can store the state there.
//  * Speculative decoding: a decoding sequence may carry draft tokens (SetDrafts) for its next
//    step; its chunk then runs the last known token and as many drafts as the budget leaves after
//    one token for every later running sequence, and the free state memory allows (a sequence
//    never preempts another for its drafts). Commit takes how many drafts were accepted.
// The scheduler owns the token lists (prompt + generated); the engine reads them to build the
// forward batch and reports sampled tokens through Commit (with overlap scheduling, as
// kPendingToken when the step is launched, then SetToken). Not thread-safe: the engine thread's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cache/state_cache.h"
#include "scheduler/batch_plan.h"

namespace dsinfer::scheduler {

struct SchedulerConfig {
  int64_t max_batch_tokens = 256;  // token budget of one step
  int max_running = 64;            // sequences holding state at once
  int64_t aging_steps = 32;        // steps of waiting per priority level gained
  // > 0: prefill chunks end at multiples of this many tokens (the prefix cache's checkpoints).
  int64_t checkpoint_interval = 0;
};

// The prefix cache's part in scheduling (engine-provided; each may be empty).
struct SchedulerHooks {
  // At admission: how many of `tokens`' first tokens (at most max_length) have a cached state.
  // The state stays held until `restore` or the next probe.
  std::function<int64_t(SeqId id, const std::vector<int32_t>& tokens, int64_t max_length)> probe;
  // At admission, before reserving: copy the probed state of `length` tokens into `id`'s pages
  // (the hook reserves, or shares, what the copy needs; the scheduler then reserves the rest).
  std::function<void(SeqId id, int64_t length)> restore;
  // While a state is probed: the cache id whose pages its restore shares and the tokens shared
  // (StateCache::Share), so that admission counts only the pages not shared; {0, 0}: none.
  std::function<std::pair<uint64_t, int64_t>()> shares;
  // The probed state is not restored after all (the sequence does not fit): it is held no more.
  std::function<void()> unprobe;
  // Before reserving: move the probed state into `id` instead of copying it later (a state no
  // other request is expected to share, e.g. a conversation's last turn), so that `id` needs no
  // second copy's memory; false when it is to be copied. `untake` gives it back when `id` is not
  // admitted after all.
  std::function<bool(SeqId id)> take;
  std::function<void(SeqId id)> untake;
  // Memory is short: drop one cached state (never the probed one); false when none is left.
  std::function<bool()> reclaim;
  // A running sequence is preempted: its state of tokens[0, computed) may be kept (moved out of
  // `id`, e.g. renamed into a cached state) before the scheduler frees what `id` still holds.
  // Not called for a held sequence (its last token in flight finishes it).
  std::function<void(SeqId id, const std::vector<int32_t>& tokens, int64_t computed)> preempt;
};

struct SchedulerStats {
  int64_t waiting = 0;
  int64_t running = 0;
  int64_t preemptions = 0;  // since construction
  int64_t steps = 0;
  // Readmissions of preempted sequences, those that started from at least the state they had
  // (a kept state restored), and the tokens the others compute again (what they had computed,
  // less what they restored).
  int64_t readmissions = 0;
  int64_t resumed = 0;
  int64_t recomputed_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, cache::StateCache* cache);

  const SchedulerConfig& config() const { return config_; }
  // Changes the token budget from the next step on (tests vary it to check chunking invariance).
  void set_max_batch_tokens(int64_t n) { config_.max_batch_tokens = n; }
  void set_hooks(SchedulerHooks hooks) { hooks_ = std::move(hooks); }

  // Queues a new sequence with its prompt (>= 1 token).
  void Add(SeqId id, std::vector<int32_t> prompt, int priority);
  // A new sequence `child` that shares `parent`'s first `prefix` tokens and then `next_token`. If
  // the cache can hold it, it starts running with `prefix` tokens of state (the caller copies the
  // parent's state) and Fork returns true; otherwise it waits and recomputes, and Fork returns
  // false. The child's pages of the parent's first `shared` tokens are the parent's
  // (StateCache::Share).
  bool Fork(SeqId parent, SeqId child, int64_t prefix, int32_t next_token, int64_t shared = 0);
  // Forgets a sequence (finished or aborted) and frees its state. No-op for unknown ids.
  void Remove(SeqId id);
  // Overlap scheduling: `id` (running) is not scheduled again — its last token in flight is known
  // to finish it (its token limit) — until Remove. It keeps its state; no-op for unknown ids.
  void Hold(SeqId id);

  // Draft tokens to verify after `id`'s last known token in the next step (replaces earlier
  // ones; ignored unless `id` is running with only that token left to compute). Cleared by the
  // next Commit or a preemption.
  void SetDrafts(SeqId id, std::vector<int32_t> drafts);
  const std::vector<int32_t>& drafts(SeqId id) const { return seqs_.at(id)->drafts; }

  BatchPlan Schedule();
  // Advances the planned chunks and appends `next_tokens` (one per chunk with samples == true, in
  // plan order) to their sequences. `accepted_drafts` (empty: none; else aligned with
  // next_tokens): how many of a chunk's drafts were accepted; those drafts are appended before its
  // next token, and the rejected ones are not counted as computed (the runner rolled them back).
  void Commit(const BatchPlan& plan, const std::vector<int32_t>& next_tokens,
              const std::vector<int64_t>& accepted_drafts = {});

  // Overlap scheduling: the token at `index` of `id`, committed as kPendingToken while its draw was
  // in flight, is `token`. No-op for unknown ids (finished or aborted since).
  void SetToken(SeqId id, int64_t index, int32_t token);
  // A draw committed as kPendingToken at the launch is dropped (it sat out the step: its grammar
  // mask was late): `id`'s pending last token goes, and so does the state of the token before it,
  // which the next step computes again for the draw — the sequence is as if its chunk's last row
  // had not been scheduled. Returns the length its model state is to be rolled back to (by the
  // caller), or nullopt when it holds no state of that token (a fork still waiting for memory).
  // Clears a Hold (the dropped draw no longer finishes it).
  std::optional<int64_t> Retract(SeqId id);

  bool Contains(SeqId id) const { return seqs_.count(id) > 0; }
  // Running with state for all its tokens but the last (its next step is a decode).
  bool Decoding(SeqId id) const;
  const std::vector<int32_t>& tokens(SeqId id) const;
  int64_t computed(SeqId id) const;
  bool idle() const { return seqs_.empty(); }
  SchedulerStats Stats() const;

 private:
  struct Seq {
    SeqId id = 0;
    std::vector<int32_t> tokens;
    int64_t computed = 0;   // tokens whose state exists
    int priority = 0;
    uint64_t arrival = 0;   // FCFS order; kept across preemption
    int64_t enqueued_step = 0;
    bool running = false;
    bool held = false;            // Hold: not scheduled again
    int64_t lost = 0;             // tokens computed when it was last preempted (until readmitted)
    std::vector<int32_t> drafts;  // for the next step (SetDrafts)
  };
  int64_t EffectivePriority(const Seq& s) const;
  // Tokens of a prefill chunk of `s` from `start`: at most `budget`, ending at the next
  // checkpoint position when one falls inside.
  int64_t ChunkTokens(const Seq& s, int64_t start, int64_t budget) const;
  // Reserve / CanReserve that first drop cached states (hooks_.reclaim) while memory is short.
  bool ReserveReclaiming(SeqId id, int64_t length);
  // (with the probed state's sharing, hooks_.shares, when there is one).
  bool CanReserveReclaiming(SeqId id, int64_t length);
  void Preempt(Seq* s, BatchPlan* plan);
  // Running sequences in scheduling order.
  std::vector<Seq*> RunningOrder();

  SchedulerConfig config_;
  SchedulerHooks hooks_;
  cache::StateCache* cache_;
  std::map<SeqId, std::unique_ptr<Seq>> seqs_;
  uint64_t next_arrival_ = 0;
  int64_t step_ = 0;
  int64_t preemptions_ = 0;
  int64_t readmissions_ = 0, resumed_ = 0, recomputed_tokens_ = 0;
};

}  // namespace dsinfer::scheduler
