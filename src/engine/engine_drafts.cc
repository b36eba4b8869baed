// EngineCore's speculative drafting (engine_core.h): how many drafts each completion proposes
// (the adaptive length and the request's limits and output constraint), from the n-gram index or
// the runner's MTP layer or DSpark drafter.
#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "engine/engine_core.h"
#include "speculative/ngram.h"

namespace dsinfer::engine {

using scheduler::SeqId;

void EngineCore::LimitDrafts(const RequestState& r, CompletionState& c,
                             std::vector<int32_t>* drafts) const {
  // The last draft's row draws token prompt + generated + drafts + 1, at most max_new_tokens.
  // (DSpark's drafts come cut to the length its confidence head chose.)
  const int64_t length = spec_.method == SpeculativeOptions::Method::kDSpark
                             ? static_cast<int64_t>(drafts->size())
                             : c.draft_length.Next(&spec_cost_, spec_batch_);
  const int64_t room = std::min<int64_t>(length, r.req.max_new_tokens - c.generated - 1);
  if (static_cast<int64_t>(drafts->size()) > room)
    drafts->resize(static_cast<size_t>(std::max<int64_t>(0, room)));
  if (!c.matcher) return;
  // A constrained verify chunk may sit out (its first row's grammar mask late), which rolls back
  // its known token and its drafts.
  if (sit_out_slack_ > 0 && static_cast<int>(drafts->size()) >= sit_out_slack_)
    drafts->resize(static_cast<size_t>(sit_out_slack_ - 1));
  // Emitted tokens the matcher has not taken yet (its automaton was busy): no drafts until the
  // next mask job applies them. The engine thread does not wait for a busy automaton here either
  // (TryAdvance): the drafts end where it is busy.
  if (!c.behind.empty()) drafts->clear();
  bool active = c.matcher_active;
  int advanced = 0;
  size_t keep = 0;
  bool completed = false;  // (the matcher is not completed here: Emit would have ended it)
  for (; keep < drafts->size() && !completed; ++keep) {
    const int32_t t = (*drafts)[keep];
    if (active) {
      const std::optional<bool> step = c.matcher->TryAdvance(t);
      if (!step) break;
      completed = *step;
      ++advanced;
    } else if (t == think_end_id_) {
      active = true;
    }
  }
  c.matcher->Rollback(advanced);
  drafts->resize(keep);
}

void EngineCore::ProposeDrafts() {
  const speculative::NgramOptions ngram{spec_.ngram_min, spec_.ngram_max};
  for (auto& [id, r] : requests_) {
    for (CompletionState& c : r.completions) {
      const SeqId seq = SeqOf(id, c.index);
      // Not before the first token: a prompt's last token is drawn from by n > 1 siblings too.
      if (!c.started || c.finished || c.generated == 0 || !scheduler_->Decoding(seq)) continue;
      std::vector<int32_t> drafts;
      if (spec_.method == SpeculativeOptions::Method::kNgram) {
        const int k = static_cast<int>(std::min<int64_t>(
            c.draft_length.Next(&spec_cost_, spec_batch_), r.req.max_new_tokens - c.generated - 1));
        drafts = drafter_ ? drafter_(id, c.index, scheduler_->tokens(seq), k)
                          : c.ngram_index.Propose(scheduler_->tokens(seq), k, ngram);
      } else {
        drafts = c.model_drafts;
      }
      LimitDrafts(r, c, &drafts);
      scheduler_->SetDrafts(seq, std::move(drafts));
    }
  }
}

void EngineCore::DraftWithModel(const std::vector<Drawn>& drawn) {
  const bool dspark = spec_.method == SpeculativeOptions::Method::kDSpark;
  std::vector<executor::MtpDraftRequest> asks;
  std::vector<CompletionState*> owners;
  std::vector<int64_t> rooms;
  for (size_t i = 0; i < drawn.size(); ++i) {
    // The last token drawn for a completion this step.
    if (i + 1 < drawn.size() && drawn[i + 1].request == drawn[i].request &&
        drawn[i + 1].index == drawn[i].index)
      continue;
    auto it = requests_.find(drawn[i].request);
    if (it == requests_.end()) continue;
    CompletionState& c = it->second.completions[drawn[i].index];
    const SeqId seq = SeqOf(it->first, c.index);
    c.model_drafts.clear();
    if (c.finished || !scheduler_->Decoding(seq)) continue;
    const int64_t room = it->second.req.max_new_tokens - c.generated - 1;
    // MTP chains as many drafts as are worth verifying; DSpark drafts its block at once (then its
    // confidence head sets how many are verified), unless its acceptance says drafting does not
    // pay.
    const int64_t k = std::min<int64_t>(c.draft_length.Next(&spec_cost_, spec_batch_), room);
    if (k < 1) continue;
    asks.push_back({seq, scheduler_->tokens(seq).back(), static_cast<int>(k)});
    owners.push_back(&c);
    rooms.push_back(room);
  }
  if (asks.empty()) return;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::vector<int32_t>> ids(asks.size());
  std::vector<std::vector<float>> accept(asks.size());
  if (dspark) {
    auto blocks = runner_->DraftDSpark(asks);
    DSINFER_CHECK(blocks.ok());  // the runner checked its drafter at creation
    for (size_t i = 0; i < asks.size(); ++i) {
      ids[i] = std::move((*blocks)[i].ids);
      accept[i] = std::move((*blocks)[i].accept_prob);
    }
  } else {
    auto drafts = runner_->DraftMtp(asks);
    DSINFER_CHECK(drafts.ok());  // the runner checked its MTP layer at creation
    ids = std::move(*drafts);
  }
  if (spec_.adaptive) {
    int64_t tokens = 0;
    for (const auto& d : ids) tokens += static_cast<int64_t>(d.size());
    spec_cost_.ObserveDrafting(tokens, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  for (size_t i = 0; i < owners.size(); ++i) {
    std::vector<int32_t>& d = ids[i];
    if (dspark) {
      const int64_t k = std::min<int64_t>(
          owners[i]->draft_length.FromSurvival(accept[i], &spec_cost_, spec_batch_), rooms[i]);
      if (static_cast<int64_t>(d.size()) > k)
        d.resize(static_cast<size_t>(std::max<int64_t>(k, 0)));
    }
    owners[i]->model_drafts = std::move(d);
  }
}

}  // namespace dsinfer::engine
