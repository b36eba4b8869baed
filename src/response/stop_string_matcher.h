// StopStringMatcher: finds stop strings in generated text that arrives in deltas (token pieces), so a
// stop string split across tokens is still found. Text that could still be the start of a stop
// string is held back until the next delta decides it; Flush() releases it when generation ends for
// another reason. Owned by one completion; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::response {

class StopStringMatcher {
 public:
  StopStringMatcher() = default;
  StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output);

  struct Result {
    std::string text;     // safe to emit now
    bool stopped = false; // a stop string was completed; `text` ends before it (or with it)
    std::string matched;  // which one
  };
  // Adds a delta. After a stop, further pushes return nothing.
  Result Push(std::string_view delta);
  // The held-back text (no stop can complete any more).
  std::string Flush();
  bool active() const { return !stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  bool include_ = false;
  bool stopped_ = false;
  std::string pending_;  // received, not yet emitted
};

}  // namespace dsinfer::response
