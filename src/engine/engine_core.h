// EngineCore: the single-threaded engine step loop (docs/architecture.md §1):
//   Schedule -> Launch (forward) -> Commit -> masks -> Sample (draws) -> Collect -> Emit
// With overlap scheduling (on by default on a GPU) a step's Collect and Emit come in the next
// step, after that step's launch: the CPU schedules step N+1 and emits step N-1 while the device
// runs step N. Tokens still in flight are committed as placeholders (scheduler::kPendingToken)
// that the next forward reads on the device; a completion that finishes at step N-1 has had one
// more token launched at step N, which is dropped, so the outputs are the same either way.
// It owns the model runner, the state cache, the scheduler and every request's state; the
// threaded Engine (engine_loop.h) feeds it from queues, and tests drive it directly. Each request
// has n completions; each completion is one scheduler sequence (id = request id << 8 | index).
// n > 1 prefills the prompt once: completion 0 runs it, and at its first sample the others are
// forked from its state. With speculative decoding, decoding completions propose drafts before
// the schedule, a verify chunk draws a token at each of its last drafts + 1 rows, the longest
// prefix of drafts equal to the draws is accepted and the rest rolled back. Structured output:
// a step's grammar masks are computed on mask workers while its forward runs; a draw whose mask
// is late (EngineOptions::structured_mask_deadline_us after the logits are ready) sits out the
// step — its row's token is rolled back and run again by a later step, where it draws with the
// same (seed, completion, position), so the outputs do not change; a verify chunk draws at the
// rows whose masks are ready (fewer drafts verified) or, with none, sits out. Not thread-safe,
// except Prepare(), which only reads immutable data.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/check.h"
#include "cache/host_tier.h"
#include "cache/prefix_index.h"
#include "cache/state_cache.h"
#include "dsinfer/engine.h"
#include "engine/mask_workers.h"
#include "engine/text_codec.h"
#include "executor/model_runner.h"
#include "io/model_family.h"
#include "sampler/token_history.h"
#include "scheduler/scheduler.h"
#include "speculative/draft_length.h"
#include "speculative/ngram.h"
#include "structured/constraint_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/stop_string_matcher.h"

namespace dsinfer::engine {

using Clock = std::chrono::steady_clock;

// A validated request with its prompt ids and the limits the engine derived.
struct PreparedRequest {
  std::vector<int32_t> prompt;
  sampler::SamplingParams params;
  uint64_t seed = 0;
  int priority = 0;
  int64_t max_new_tokens = 0;  // params.max_tokens capped by the context and the state budget
  // The compiled params.structured_outputs (shared through the engine's cache), or null.
  std::shared_ptr<structured::TokenAutomaton> constraint;
  bool constraint_after_reasoning = false;  // thinking chat: the constraint starts after </think>
  Clock::time_point arrival;
};

class EngineCore {
 public:
  // `codec`: nullptr loads the model dir's tokenizer (tests pass their own).
  static StatusOr<std::unique_ptr<EngineCore>> Create(const EngineOptions& options,
                                                      std::unique_ptr<TextCodec> codec = nullptr);
  // Collects a step still in flight (its draws are dropped) before the runner goes.
  ~EngineCore();

  // Validates and encodes (thread-safe; see the file comment).
  StatusOr<PreparedRequest> Prepare(const GenerateRequest& request) const;
  // `id` must be new and non-zero.
  void Add(uint64_t id, PreparedRequest request);
  // Finishes every open completion of `id` with kAbort and frees its state.
  void Abort(uint64_t id, std::vector<StreamEvent>* events);
  // One engine step; appends the events it produced.
  void Step(std::vector<StreamEvent>* events);

  bool HasWork() const { return !requests_.empty() || inflight_.has_value(); }
  bool overlap() const { return overlap_; }
  // Tests: proposes the drafts of the n-gram method instead of the n-gram lookup, as
  // drafter(request id, completion index, prompt and output so far, at most k).
  using Drafter =
      std::function<std::vector<int32_t>(uint64_t, int, const std::vector<int32_t>&, int)>;
  void set_drafter(Drafter drafter) { drafter_ = std::move(drafter); }
  // Adaptive speculation's measured costs (tests preload observations to steer the draft length).
  speculative::StepCostModel& spec_cost() { return spec_cost_; }
  // Tests: runs on a mask worker before the masks of each (request, completion index, position)
  // are computed — a slow or blocked mask, deterministically. Set before the first Step; a
  // blocked hook must be released before the core is destroyed.
  void set_mask_hook(MaskWorkers::Hook hook) {
    DSINFER_CHECK(!mask_workers_);
    mask_hook_ = std::move(hook);
  }
  EngineStats Stats() const;
  int64_t vocab_size() const { return runner_->info().vocab_size; }
  int64_t max_model_len() const { return max_model_len_; }
  const char* device() const { return executor::DeviceName(device_); }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }
  const char* model_family() const { return io::ModelFamilyName(runner_->info().family); }
  bool has_tokenizer() const { return codec_->has_text(); }
  const TextCodec& codec() const { return *codec_; }
  const cache::StateCache& cache() const { return *cache_; }
  scheduler::Scheduler& scheduler() { return *scheduler_; }
  // Sequences that hold model state (for tests: 0 once everything has finished); the prefix
  // cache's states are not counted.
  size_t num_states() const { return runner_->num_sequences() - DeviceCheckpoints(); }
  // Drops every state of the prefix cache.
  void ClearPrefixCache();

 private:
  struct CompletionState {
    int index = 0;
    bool started = false;   // has a scheduler sequence
    bool finished = false;
    sampler::TokenHistory history;
    std::unique_ptr<IncrementalDecoder> decoder;
    tokenizer::StopStringMatcher stops{{}};
    int64_t generated = 0;
    Clock::time_point first_token;
    std::unique_ptr<structured::Matcher> matcher;  // with an output constraint
    bool matcher_active = false;                   // false while the reasoning runs
    std::shared_ptr<MaskJob> mask_job;             // masks of its next draw, until drawn
    // Emitted tokens the matcher has not taken yet (its automaton was busy computing a mask at
    // the emit): the next mask job applies them (CatchUp).
    std::vector<int32_t> behind;
    speculative::DraftLength draft_length;  // drafts per verify step
    speculative::NgramIndex ngram_index;    // n-gram drafts without rescanning
    std::vector<int32_t> model_drafts;      // the MTP layer's or DSpark's drafts for the next step
    int64_t draft_tokens = 0, accepted_tokens = 0;
  };
  struct RequestState {
    uint64_t id = 0;
    PreparedRequest req;
    std::vector<CompletionState> completions;
    bool forked = false;
    int open = 0;
    // prompt_logprobs: entry t - 1 scores prompt token t; tokens up to `scored` have their draw
    // planned (each once, whatever preemption recomputes); sent with completion 0's first token.
    std::vector<TokenLogprobs> prompt_logprobs;
    int64_t scored = 0;
    bool prompt_logprobs_sent = false;
  };
  // One draw of this step: a row's own sequence, or a sibling forked at its first sample.
  struct DrawJob {
    uint64_t request = 0;
    int index = 0;
    int chunk = 0;  // the plan's chunk whose last row it draws from
    int64_t position = 0;
    bool own = false;     // the row's sequence (its token is committed to the scheduler)
    int row = -1;         // the chunk's row (-1: the last); a verify chunk draws at several
    int pending = 0;      // the chunk's drafts before that row (counted by penalties and grammar)
    int32_t forced = -1;  // prompt_logprobs: scores prompt token `position` (= forced), no draw
  };
  // A token drawn this step for one completion.
  struct Drawn {
    uint64_t request = 0;
    int index = 0;
    sampler::SampledToken token;
  };

  // A step launched and sampled whose tokens are not collected yet.
  struct Launched {
    scheduler::BatchPlan plan;
    std::vector<DrawJob> jobs;  // the draws made, in draw order
    Clock::time_point launched;
    bool decode = false;  // every chunk one known token of a running sequence
  };

  EngineCore() = default;
  static scheduler::SeqId SeqOf(uint64_t request, int index) { return request << 8 | index; }
  // The draws of a plan: one per chunk that reaches its sequence's end (one per row of a verify
  // chunk's last drafts + 1), and the siblings of a first sample.
  std::vector<DrawJob> PlanDraws(const scheduler::BatchPlan& plan);
  // Launches the plan's forward, keeping the logits rows the jobs draw from. A chunk whose last
  // token is still in flight feeds it from the in-flight step's draw.
  Status Launch(const scheduler::BatchPlan& plan, const std::vector<DrawJob>& jobs);
  // Right after the launch: the chunks without drafts advance, their draws' tokens pending; the
  // siblings of a first sample fork from completion 0's state (the prompt).
  void CommitLaunched(const scheduler::BatchPlan& plan, const std::vector<DrawJob>& jobs);
  // The draws of the launched step, with the masks and histories as they are now (every earlier
  // token emitted); jobs of completions that finished since the launch are dropped.
  void SampleLaunched(scheduler::BatchPlan plan, std::vector<DrawJob> jobs,
                      Clock::time_point launched, std::vector<StreamEvent>* events);
  // Collects the in-flight step: fills in its pending tokens, verifies drafts, emits.
  void Complete(std::vector<StreamEvent>* events);
  // The completion a job draws for, or null once it has finished.
  CompletionState* Live(const DrawJob& job);
  // The compiled constraint of `spec` (thread-safe: called from Prepare).
  StatusOr<std::shared_ptr<structured::TokenAutomaton>> Constraint(
      const structured::ConstraintSpec& spec) const;
  // One constrained completion's draws of a step, jobs [first, last), and its masks.
  struct MaskGroup {
    size_t first = 0, last = 0;
    std::shared_ptr<MaskJob> masks;
  };
  // Starts the mask jobs of the constrained completions among `jobs` (each completion's draws
  // consecutive) that have none for these draws yet: with `known_only`, only those whose earlier
  // tokens are all emitted (not one still drawn by the step in flight). Returns the groups.
  std::vector<MaskGroup> StartMasks(const std::vector<DrawJob>& jobs, bool known_only);
  // Waits for the groups' masks until they are done or the mask deadline has passed since the
  // step's logits were ready (0: until done).
  void WaitForMasks(const std::vector<MaskGroup>& groups);
  // A draw whose mask was late: dropped, and its sequence put back as if its chunk's last row had
  // not been scheduled (the pending token dropped, the row's token rolled back), so a later step
  // runs that row again and draws the same token.
  void SitOut(const DrawJob& job);
  // A verify chunk whose first row's mask was late: all its draws dropped and its rows rolled
  // back (the known token's too, as SitOut does), so a later step runs the chunk again.
  void SitOutVerify(const DrawJob& job, const scheduler::ScheduledChunk& chunk);
  // Takes over the matcher states a done mask job computed for `c`'s behind tokens; a
  // constraint that failed or completed there finishes the completion (returns false).
  bool CatchUp(RequestState& r, CompletionState& c, const MaskJob& job,
               std::vector<StreamEvent>* events);
  // Ends `c` where its constraint failed (`status`) or completed at a token already emitted, in
  // an event of its own (the finish that token's emit would have given).
  void EndAtConstraint(RequestState& r, CompletionState& c, const Status& status,
                       std::vector<StreamEvent>* events);
  // Applies one drawn token to its completion: stop checks, text, event; frees it when finished.
  void Emit(const Drawn& d, std::vector<StreamEvent>* events);
  // Speculative decoding: sets the drafts of every decoding completion for the next schedule.
  void ProposeDrafts();
  // `drafts` cut to what the completion can still use: its token limit and its output constraint
  // (a draft the constraint rejects, and everything after it, is dropped).
  void LimitDrafts(const RequestState& r, CompletionState& c, std::vector<int32_t>* drafts) const;
  // MTP / DSpark: drafts for the next step of the completions that drew a token this step.
  void DraftWithModel(const std::vector<Drawn>& drawn);
  // Prefix cache: its index and host tier, and the scheduler's hooks into it (Create).
  void StartPrefixCache(const EngineOptions& options, size_t max_checkpoints);
  // Prefix cache: stores a copy of `seq`'s state of its first `length` tokens (if not held yet and
  // memory allows, evicting older copies, and a finished completion's kept state only to the host
  // tier).
  void Checkpoint(scheduler::SeqId seq, int64_t length);
  // A finished completion's state becomes a cached state as it is (renamed, no copy); restoring
  // it moves it into the next request (a chat's next turn) instead of copying it.
  void KeepFinished(scheduler::SeqId seq, int64_t length);
  // A preempted sequence's state of its first `length` tokens becomes a cached state the same
  // way (its readmission moves it back, from state memory or the host tier); it is dropped when
  // the sequence finishes before that.
  void KeepPreempted(scheduler::SeqId seq, int64_t length);
  // The least recently used cached state in state memory (never the probed one; copies_only: a
  // copied one, or a kept state that moves to the host tier) leaves it: to the host tier when
  // there is one and it fits, else dropped. False when none is left.
  bool EvictCheckpoint(bool copies_only = false);
  // Tokens of `seq`'s state of its first `length` whose list pages a copy shares (0: sharing off).
  int64_t SharedLength(scheduler::SeqId seq, int64_t length) const;
  // Copies cached state `id` to the host tier (dropping the tier's least recently used states to
  // make room, never the probed one); false when there is no tier or it does not fit.
  bool OffloadCheckpoint(scheduler::SeqId id);
  // Forgets cached state `id` in whichever tier holds it.
  void DropCached(scheduler::SeqId id);
  // Cached states in state memory (the prefix index holds the host tier's too).
  size_t DeviceCheckpoints() const { return prefix_ ? prefix_->size() - host_states_.size() : 0; }
  // After a step's commit: the checkpoints its chunks reached (interval multiples, prompt ends);
  // the chunks with drafts (verified == true, committed once collected) or those without.
  void CheckpointStep(const scheduler::BatchPlan& plan, bool verified);
  void Finish(RequestState& r, CompletionState& c, FinishReason reason, StreamEvent* ev);
  void FailBatch(const scheduler::BatchPlan& plan, const Status& status, std::vector<StreamEvent>* events);

  std::unique_ptr<executor::ModelRunner> runner_;  // the model on its backend, and its states
  executor::Device device_ = executor::Device::kCpu;
  int64_t max_batch_tokens_ = 0;  // EngineOptions::max_batch_tokens resolved for device_
  std::unique_ptr<TextCodec> codec_;
  std::unique_ptr<cache::StateCache> cache_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  int64_t max_model_len_ = 0;
  int64_t max_fit_len_ = 0;  // longest sequence the state budget holds alone
  std::unordered_map<uint64_t, RequestState> requests_;
  EngineStats stats_;
  int32_t think_end_id_ = -1;  // "</think>" when the tokenizer has it
  mutable std::once_flag constraints_once_;
  mutable std::unique_ptr<structured::ConstraintCache> constraints_;
  std::chrono::microseconds mask_deadline_{0};  // EngineOptions::structured_mask_deadline_us
  int sit_out_slack_ = 0;  // rows a sit-out may roll back (RunnerOptions::max_rollback)
  MaskWorkers::Hook mask_hook_;
  SpeculativeOptions spec_;
  speculative::StepCostModel spec_cost_;  // adaptive speculation's measured step and draft costs
  int64_t spec_batch_ = 1;                // sequences decoding in the last step (for its costs)
  Drafter drafter_;
  bool overlap_ = false;
  bool share_pages_ = true;       // EngineOptions::share_state_pages
  bool prompt_logprobs_ = false;  // CUDA: the runner keeps every row's logits
  std::optional<Launched> inflight_;
  // Prefix cache (null when off): its index; states live in the state cache and the runner under
  // ids with kCheckpointBit set.
  static constexpr scheduler::SeqId kCheckpointBit = scheduler::SeqId{1} << 63;
  std::unique_ptr<cache::PrefixIndex> prefix_;
  int64_t checkpoint_interval_ = 0;
  size_t max_checkpoints_ = 0;
  scheduler::SeqId probed_ = 0;  // the state the scheduler's last probe found (kept until restored)
  scheduler::SeqId next_checkpoint_ = 0;
  std::unordered_set<scheduler::SeqId> movable_;  // cached states restored by moving them
  // Sequences preempted with their state kept: the cached state's id (dropped if the sequence
  // finishes before it is restored).
  std::unordered_map<scheduler::SeqId, scheduler::SeqId> kept_preempted_;
  // The host tier (null when off): its accounting, and the states it holds (their ids stay in
  // prefix_; their state memory and runner states are released).
  std::unique_ptr<cache::HostTier> host_;
  std::unordered_map<scheduler::SeqId, std::unique_ptr<executor::HostState>> host_states_;
  struct Taken {  // a state moved into a sequence at admission
    scheduler::SeqId checkpoint = 0;
    std::vector<int32_t> tokens;
  } taken_;
  // Created at the first constrained draw; last, so that its workers stop before anything else
  // goes.
  std::unique_ptr<MaskWorkers> mask_workers_;
};

}  // namespace dsinfer::engine
