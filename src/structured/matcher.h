// Matcher: one sequence's position in a constraint: advanced by each accepted token, rolled back
// by k tokens (speculative decoding), asked for the next step's token mask. Its state is a
// configuration id of the shared TokenAutomaton per token, so Rollback is a pop. One per
// completion; not thread-safe (the automaton it shares is).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "structured/token_automaton.h"

namespace dsinfer::structured {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<TokenAutomaton> automaton);

  // Accepts `token` (InvalidArgument, state unchanged, if the constraint does not allow it; the
  // automaton's error if it hit a limit). EOS is allowed only where IsAccepting().
  Status Advance(int32_t token);
  // Advance without waiting while another thread uses the automaton (a mask being computed):
  // nullopt, the state unchanged, when it is busy or the token is not allowed (Advance then says
  // why); else whether the constraint is now completed (IsCompleted()).
  std::optional<bool> TryAdvance(int32_t token);
  // Undoes the last `k` accepted tokens (k <= num_tokens()).
  void Rollback(int k);
  int num_tokens() const { return static_cast<int>(history_.size()) - 1; }

  // The text so far is a complete match.
  bool IsAccepting() const;
  // Complete and nothing may follow (or EOS was accepted): the request is done.
  bool IsCompleted() const;
  // The tokens allowed next: [vocab mask words]. After EOS, none.
  std::shared_ptr<const TokenMask> Mask() const;
  // A matcher at this one's state without its history (it cannot roll back past here): a copy
  // that another thread may advance and ask for masks while this one goes on (the engine's mask
  // workers).
  Matcher Snapshot() const;
  // Takes the states of `ahead` — a Snapshot() of this matcher's state, advanced by `k` tokens on
  // another thread — as its own (no automaton call).
  void Append(const Matcher& ahead, int k);
  TokenAutomaton& automaton() const { return *automaton_; }

 private:
  Matcher(std::shared_ptr<TokenAutomaton> automaton, int32_t config, char ended);

  std::shared_ptr<TokenAutomaton> automaton_;
  std::vector<int32_t> history_;  // configuration after each token; [0] = initial
  std::vector<char> ended_;       // EOS accepted at that point
};

}  // namespace dsinfer::structured
