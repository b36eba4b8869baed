#include "scheduler/scheduler.h"

#include <algorithm>
#include <unordered_set>

#include "base/check.h"

namespace dsinfer::scheduler {

Scheduler::Scheduler(SchedulerConfig config, cache::StateCache* cache)
    : config_(config), cache_(cache) {
  DSINFER_CHECK(cache_ != nullptr && config_.max_batch_tokens >= 1 && config_.max_running >= 1);
  config_.aging_steps = std::max<int64_t>(1, config_.aging_steps);
}

void Scheduler::Add(SeqId id, std::vector<int32_t> prompt, int priority) {
  DSINFER_CHECK(!prompt.empty() && !seqs_.count(id));
  auto s = std::make_unique<Seq>();
  s->id = id;
  s->tokens = std::move(prompt);
  s->priority = priority;
  s->arrival = next_arrival_++;
  s->enqueued_step = step_;
  seqs_[id] = std::move(s);
}

bool Scheduler::Fork(SeqId parent, SeqId child, int64_t prefix, int32_t next_token,
                     int64_t shared) {
  const Seq& p = *seqs_.at(parent);
  DSINFER_CHECK(!seqs_.count(child) && prefix <= static_cast<int64_t>(p.tokens.size()));
  auto s = std::make_unique<Seq>();
  s->id = child;
  s->tokens.assign(p.tokens.begin(), p.tokens.begin() + prefix);
  s->tokens.push_back(next_token);
  s->priority = p.priority;
  s->arrival = p.arrival;  // siblings keep their parent's place in line
  s->enqueued_step = step_;
  int64_t running = 0;
  for (const auto& [id, q] : seqs_) running += q->running ? 1 : 0;
  const bool shares = p.running && p.computed >= prefix && running < config_.max_running &&
                      cache_->CanReserve(child, prefix, parent, shared);
  if (shares) {
    if (shared > 0) cache_->Share(parent, child, shared);
    DSINFER_CHECK(cache_->Reserve(child, prefix).ok());
    s->running = true;
    s->computed = prefix;
  }
  seqs_[child] = std::move(s);
  return shares;
}

void Scheduler::Hold(SeqId id) {
  auto it = seqs_.find(id);
  if (it != seqs_.end()) it->second->held = true;
}

void Scheduler::Remove(SeqId id) {
  cache_->Free(id);
  seqs_.erase(id);
}

void Scheduler::SetToken(SeqId id, int64_t index, int32_t token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  std::vector<int32_t>& tokens = it->second->tokens;
  DSINFER_CHECK(index >= 0 && index < static_cast<int64_t>(tokens.size()) &&
                tokens[index] == kPendingToken && token != kPendingToken);
  tokens[index] = token;
}

std::optional<int64_t> Scheduler::Retract(SeqId id) {
  Seq& s = *seqs_.at(id);
  DSINFER_CHECK(s.tokens.size() >= 2 && s.tokens.back() == kPendingToken);
  s.tokens.pop_back();
  s.held = false;
  s.drafts.clear();
  const auto known = static_cast<int64_t>(s.tokens.size());
  if (!s.running || s.computed < known) return std::nullopt;
  DSINFER_CHECK(s.computed == known);
  s.computed = known - 1;
  return s.computed;
}

const std::vector<int32_t>& Scheduler::tokens(SeqId id) const { return seqs_.at(id)->tokens; }
int64_t Scheduler::computed(SeqId id) const { return seqs_.at(id)->computed; }

int64_t Scheduler::ChunkTokens(const Seq& s, int64_t start, int64_t budget) const {
  int64_t count = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - start, budget);
  const int64_t every = config_.checkpoint_interval;
  if (every > 0 && count > 1) {
    const int64_t next = (start / every + 1) * every;
    if (next < start + count) count = next - start;
  }
  return count;
}

bool Scheduler::ReserveReclaiming(SeqId id, int64_t length) {
  while (!cache_->Reserve(id, length).ok()) {
    if (!hooks_.reclaim || !hooks_.reclaim()) return false;
  }
  return true;
}

bool Scheduler::CanReserveReclaiming(SeqId id, int64_t length) {
  const auto sharing = [this] {
    return hooks_.shares ? hooks_.shares() : std::pair<uint64_t, int64_t>{0, 0};
  };
  for (auto share = sharing(); !cache_->CanReserve(id, length, share.first, share.second);
       share = sharing()) {
    if (!hooks_.reclaim || !hooks_.reclaim()) return false;
  }
  return true;
}

int64_t Scheduler::EffectivePriority(const Seq& s) const {
  return s.priority - (step_ - s.enqueued_step) / config_.aging_steps;
}

bool Scheduler::Decoding(SeqId id) const {
  auto it = seqs_.find(id);
  return it != seqs_.end() && it->second->running &&
         static_cast<int64_t>(it->second->tokens.size()) - it->second->computed == 1;
}

void Scheduler::SetDrafts(SeqId id, std::vector<int32_t> drafts) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  it->second->drafts = Decoding(id) ? std::move(drafts) : std::vector<int32_t>{};
}

void Scheduler::Preempt(Seq* s, BatchPlan* plan) {
  if (hooks_.preempt && !s->held && s->computed > 0) hooks_.preempt(s->id, s->tokens, s->computed);
  s->lost = s->computed;
  cache_->Free(s->id);
  s->drafts.clear();
  s->running = false;
  s->computed = 0;
  s->enqueued_step = step_;
  plan->preempted.push_back(s->id);
  ++preemptions_;
}

std::vector<Scheduler::Seq*> Scheduler::RunningOrder() {
  std::vector<Seq*> order;
  for (auto& [id, s] : seqs_) {
    if (s->running) order.push_back(s.get());
  }
  std::sort(order.begin(), order.end(), [](const Seq* a, const Seq* b) {
    return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival ||
                                        (a->arrival == b->arrival && a->id < b->id);
  });
  return order;
}

BatchPlan Scheduler::Schedule() {
  ++step_;
  BatchPlan plan;
  int64_t budget = config_.max_batch_tokens;
  std::vector<Seq*> running = RunningOrder();
  // 1. Running sequences, highest priority first; victims come from the unscheduled tail.
  for (size_t i = 0; i < running.size(); ++i) {
    Seq* s = running[i];
    if (!s->running || s->held || budget == 0) continue;
    int64_t count = ChunkTokens(*s, s->computed, budget);
    DSINFER_CHECK(count >= 1);
    int64_t drafts = 0;
    if (!s->drafts.empty() && count == 1) {
      // Every later running sequence keeps at least one token of the budget.
      int64_t later = 0;
      for (size_t j = i + 1; j < running.size(); ++j) later += running[j]->running ? 1 : 0;
      drafts = std::clamp<int64_t>(budget - 1 - later, 0, static_cast<int64_t>(s->drafts.size()));
      if (drafts > 0 && !cache_->Reserve(s->id, s->computed + 1 + drafts).ok()) drafts = 0;
      count += drafts;
    }
    while (!ReserveReclaiming(s->id, s->computed + count)) {
      Seq* victim = nullptr;
      for (size_t j = running.size(); j-- > i + 1;) {
        if (running[j]->running) {
          victim = running[j];
          break;
        }
      }
      Preempt(victim ? victim : s, &plan);
      if (!victim) break;
    }
    if (!s->running) continue;
    plan.chunks.push_back({s->id, s->computed, count,
                           s->computed + count - drafts == static_cast<int64_t>(s->tokens.size()),
                           drafts});
    budget -= count;
  }
  // 2. Admission of waiting sequences.
  std::unordered_set<SeqId> just_preempted(plan.preempted.begin(), plan.preempted.end());
  std::vector<Seq*> waiting;
  int64_t num_running = 0;
  for (auto& [id, s] : seqs_) {
    if (s->running) {
      ++num_running;
    } else if (!just_preempted.count(id) && !s->held) {
      waiting.push_back(s.get());
    }
  }
  std::sort(waiting.begin(), waiting.end(), [this](const Seq* a, const Seq* b) {
    const int64_t pa = EffectivePriority(*a), pb = EffectivePriority(*b);
    return pa != pb ? pa < pb : a->arrival < b->arrival || (a->arrival == b->arrival && a->id < b->id);
  });
  for (Seq* s : waiting) {
    if (budget == 0 || num_running >= config_.max_running) break;
    const int64_t total = static_cast<int64_t>(s->tokens.size());
    // A cached state of its first tokens (at least the last one is computed: its logits).
    int64_t from = hooks_.probe ? hooks_.probe(s->id, s->tokens, total - 1) : 0;
    const bool taken = from > 0 && hooks_.take && hooks_.take(s->id);
    // Admit only if the whole known sequence (and the next token) fits now: a prefill that starts
    // is not preempted by its own later chunks. A probed state that is copied, not moved, needs
    // its own memory: when it is in the way, it may be dropped too and the sequence starts cold.
    if (!CanReserveReclaiming(s->id, total + 1)) {
      if (taken) {
        hooks_.untake(s->id);
        break;
      }
      if (from > 0) {
        hooks_.unprobe();
        from = 0;
      }
      if (!CanReserveReclaiming(s->id, total + 1)) break;
    }
    const int64_t count = ChunkTokens(*s, from, budget);
    if (from > 0 && !taken) hooks_.restore(s->id, from);
    DSINFER_CHECK(cache_->Reserve(s->id, from + count).ok());
    if (s->lost > 0) {
      ++readmissions_;
      if (from >= s->lost) ++resumed_;
      recomputed_tokens_ += std::max<int64_t>(0, s->lost - from);
      s->lost = 0;
    }
    s->running = true;
    s->computed = from;
    ++num_running;
    plan.chunks.push_back({s->id, from, count, from + count == total});
    budget -= count;
  }
  plan.num_tokens = config_.max_batch_tokens - budget;
  return plan;
}

void Scheduler::Commit(const BatchPlan& plan, const std::vector<int32_t>& next_tokens,
                       const std::vector<int64_t>& accepted_drafts) {
  DSINFER_CHECK(accepted_drafts.empty() || accepted_drafts.size() == next_tokens.size());
  size_t next = 0;
  for (const auto& ch : plan.chunks) {
    Seq& s = *seqs_.at(ch.id);
    DSINFER_CHECK(s.running && s.computed == ch.start);
    s.computed += ch.count - ch.drafts;
    if (ch.samples) {
      DSINFER_CHECK(next < next_tokens.size());
      const int64_t accepted = accepted_drafts.empty() ? 0 : accepted_drafts[next];
      DSINFER_CHECK(accepted >= 0 && accepted <= ch.drafts &&
                    ch.drafts <= static_cast<int64_t>(s.drafts.size()));
      s.tokens.insert(s.tokens.end(), s.drafts.begin(), s.drafts.begin() + accepted);
      s.computed += accepted;
      s.tokens.push_back(next_tokens[next++]);
    }
  }
  DSINFER_CHECK(next == next_tokens.size());
  for (const auto& ch : plan.chunks) seqs_.at(ch.id)->drafts.clear();
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats st;
  for (const auto& [id, s] : seqs_) (s->running ? st.running : st.waiting) += 1;
  st.preemptions = preemptions_;
  st.readmissions = readmissions_;
  st.resumed = resumed_;
  st.recomputed_tokens = recomputed_tokens_;
  st.steps = step_;
  return st;
}

}  // namespace dsinfer::scheduler
