// EngineCore's structured output (engine_core.h): a constraint's token automaton (compiled once per
// spec, over the vocabulary built at the first use), each step's grammar masks started on the mask
// workers while the forward runs and waited for up to the deadline, a completion's matcher caught
// up with the tokens a mask worker applied, the end of a completion at its constraint, and the
// draws that sit out a step (their mask late: their row's token or verify chunk rolled back).
#include <optional>

#include "base/check.h"
#include "engine/engine_core.h"

namespace dsinfer::engine {

using scheduler::SeqId;

StatusOr<std::shared_ptr<structured::TokenAutomaton>> EngineCore::Constraint(
    const structured::ConstraintSpec& spec) const {
  const tokenizer::Tokenizer* tok = codec_->tokenizer();
  if (!tok) {
    return InvalidArgument(std::string("structured output (") +
                           structured::ConstraintKindName(spec.kind) +
                           ") needs a tokenizer, and this model has none");
  }
  std::call_once(constraints_once_, [&] {
    const auto eos = static_cast<int32_t>(runner_->info().eos_token_id);
    constraints_ = std::make_unique<structured::ConstraintCache>(
        structured::Vocabulary::FromTokenizer(*tok, vocab_size(), eos));
  });
  return constraints_->Get(spec);
}

std::vector<EngineCore::MaskGroup> EngineCore::StartMasks(const std::vector<DrawJob>& jobs,
                                                          bool known_only) {
  std::vector<MaskGroup> groups;
  for (size_t i = 0; i < jobs.size();) {
    size_t end = i + 1;
    while (end < jobs.size() && jobs[end].request == jobs[i].request &&
           jobs[end].index == jobs[i].index && (jobs[end].forced < 0) == (jobs[i].forced < 0))
      ++end;
    const DrawJob& j = jobs[i];
    CompletionState* c = j.forced < 0 ? Live(j) : nullptr;
    const SeqId seq = SeqOf(j.request, j.index);
    // An own draw's sequence ends with a pending token while the step in flight draws it (a
    // sibling's first draw follows the prompt).
    const auto known = [&] {
      return !j.own || scheduler_->tokens(seq).back() != scheduler::kPendingToken;
    };
    if (c && c->matcher && (!known_only || known())) {
      // Row k of a verify chunk's draws sees the chunk's first k drafts.
      std::vector<int32_t> drafts;
      if (const int n = jobs[end - 1].pending; n > 0) {
        const std::vector<int32_t>& all = scheduler_->drafts(seq);
        drafts.assign(all.begin(), all.begin() + n);
      }
      if (!c->mask_job || c->mask_job->position() != j.position ||
          c->mask_job->drafts() != drafts ||
          c->mask_job->num_behind() != static_cast<int>(c->behind.size())) {
        if (!mask_workers_)
          mask_workers_ = std::make_unique<MaskWorkers>(2, think_end_id_, mask_hook_);
        c->mask_job = mask_workers_->Start({j.request, j.index, j.position, c->matcher->Snapshot(),
                                            c->matcher_active, std::move(drafts), c->behind});
      }
      groups.push_back({i, end, c->mask_job});
    }
    i = end;
  }
  return groups;
}

void EngineCore::WaitForMasks(const std::vector<MaskGroup>& groups) {
  if (groups.empty()) return;
  const Clock::time_point start = Clock::now();
  std::vector<const MaskJob*> all;
  for (const MaskGroup& g : groups) all.push_back(g.masks.get());
  if (mask_deadline_.count() == 0) {
    mask_workers_->Wait(all, std::nullopt);
  } else {
    // The deadline counts from when the logits are ready: until then (a GPU still running the
    // forward) no draw could be made anyway. The runner is polled while it runs.
    constexpr std::chrono::microseconds kPoll{100};
    std::optional<Clock::time_point> ready;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (!ready && runner_->LogitsReady()) ready = now;
      const Clock::time_point until = ready ? *ready + mask_deadline_ : now + kPoll;
      if (mask_workers_->Wait(all, until) || (ready && Clock::now() >= until)) break;
    }
  }
  stats_.structured_mask_wait_s += std::chrono::duration<double>(Clock::now() - start).count();
}

bool EngineCore::CatchUp(RequestState& r, CompletionState& c, const MaskJob& job,
                         std::vector<StreamEvent>* events) {
  const int k = job.num_behind();
  DSINFER_CHECK(k == static_cast<int>(c.behind.size()));
  c.behind.clear();
  const Status& status = job.behind_status();
  if (status.ok()) c.matcher->Append(job.after_behind(), k);
  if (status.ok() && !job.completed()) return true;
  EndAtConstraint(r, c, status, events);
  return false;
}

void EngineCore::EndAtConstraint(RequestState& r, CompletionState& c, const Status& status,
                                 std::vector<StreamEvent>* events) {
  // What Emit would have ended the completion with at the token (only the constraint could:
  // see Emit), in an event of its own. (An error's token has had its text sent already.)
  StreamEvent ev;
  ev.request_id = r.id;
  ev.index = c.index;
  FinishReason reason = FinishReason::kStop;
  if (!status.ok()) {
    ev.error = status;
    reason = FinishReason::kError;
  } else if (c.decoder) {
    ev.text = c.stops.Push(c.decoder->Finish()).text;
    ev.text += c.stops.Finish();
  }
  Finish(r, c, reason, &ev);
  events->push_back(std::move(ev));
  if (r.open == 0) {
    requests_.erase(r.id);
    ++stats_.requests_finished;
  }
}

void EngineCore::SitOut(const DrawJob& j) {
  const SeqId seq = SeqOf(j.request, j.index);
  if (const std::optional<int64_t> length = scheduler_->Retract(seq)) {
    const Status rolled = runner_->Rollback(seq, *length);
    DSINFER_CHECK(rolled.ok());  // one token: the slack the runner was created with
  }
}

void EngineCore::SitOutVerify(const DrawJob& j, const scheduler::ScheduledChunk& ch) {
  // Its chunk was not committed at the launch (Complete commits what it accepts): the scheduler
  // still has it to run; the runner drops the rows it ran (1 + drafts: within the slack
  // LimitDrafts keeps for a constrained completion).
  const Status rolled = runner_->Rollback(SeqOf(j.request, j.index), ch.start);
  DSINFER_CHECK(rolled.ok());
}

}  // namespace dsinfer::engine
