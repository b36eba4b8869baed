#include "response/stop_string_matcher.h"

#include <algorithm>

namespace dsinfer::response {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output)
    : stops_(std::move(stops)), include_(include_stop_in_output) {}

StopStringMatcher::Result StopStringMatcher::Push(std::string_view delta) {
  Result r;
  if (stopped_) return r;
  pending_.append(delta);
  if (stops_.empty()) {
    r.text.swap(pending_);
    return r;
  }
  // The earliest completed stop string (the longest one on a tie).
  size_t best = std::string::npos;
  const std::string* match = nullptr;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos && (at < best || (at == best && s.size() > match->size()))) {
      best = at;
      match = &s;
    }
  }
  if (match) {
    stopped_ = true;
    r.stopped = true;
    r.matched = *match;
    r.text = pending_.substr(0, best + (include_ ? match->size() : 0));
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopStringMatcher::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace dsinfer::response
