#include "structured/matcher.h"

#include "base/check.h"

namespace dsinfer::structured {

Matcher::Matcher(std::shared_ptr<TokenAutomaton> automaton) : automaton_(std::move(automaton)) {
  history_.push_back(automaton_->initial());
  ended_.push_back(0);
}

Matcher::Matcher(std::shared_ptr<TokenAutomaton> automaton, int32_t config, char ended)
    : automaton_(std::move(automaton)), history_{config}, ended_{ended} {}

Matcher Matcher::Snapshot() const { return Matcher(automaton_, history_.back(), ended_.back()); }

Status Matcher::Advance(int32_t token) {
  if (ended_.back()) return InvalidArgument("the constraint ended at EOS; no token may follow");
  const int32_t next = automaton_->AdvanceToken(history_.back(), token);
  if (next == Pda::kDead) {
    DSINFER_RETURN_IF_ERROR(automaton_->status());
    return InvalidArgument("token " + std::to_string(token) +
                           " is not allowed by the constraint here");
  }
  history_.push_back(next);
  ended_.push_back(token == automaton_->vocab().eos_id());
  return Status::Ok();
}

std::optional<bool> Matcher::TryAdvance(int32_t token) {
  if (ended_.back()) return std::nullopt;
  const auto step = automaton_->TryAdvanceToken(history_.back(), token);
  if (!step || step->config == Pda::kDead) return std::nullopt;
  const bool eos = token == automaton_->vocab().eos_id();
  history_.push_back(step->config);
  ended_.push_back(eos);
  return eos || step->completed;
}

void Matcher::Append(const Matcher& ahead, int k) {
  DSINFER_CHECK(k >= 0 && k <= ahead.num_tokens() &&
                ahead.history_[ahead.history_.size() - 1 - static_cast<size_t>(k)] ==
                    history_.back() &&
                !ended_.back());
  history_.insert(history_.end(), ahead.history_.end() - k, ahead.history_.end());
  ended_.insert(ended_.end(), ahead.ended_.end() - k, ahead.ended_.end());
}

void Matcher::Rollback(int k) {
  DSINFER_CHECK(k >= 0 && k <= num_tokens());
  history_.resize(history_.size() - static_cast<size_t>(k));
  ended_.resize(history_.size());
}

bool Matcher::IsAccepting() const {
  return ended_.back() || automaton_->accepting(history_.back());
}

bool Matcher::IsCompleted() const {
  return ended_.back() || automaton_->completed(history_.back());
}

std::shared_ptr<const TokenMask> Matcher::Mask() const {
  if (ended_.back()) {
    return std::make_shared<TokenMask>(static_cast<size_t>(automaton_->vocab().mask_words()), 0);
  }
  return automaton_->Mask(history_.back());
}

}  // namespace dsinfer::structured
