// StopStringMatcher: searches held + delta for the earliest stop string; otherwise keeps the
// longest suffix that could still grow into one.
#include "tokenizer/stop_string_matcher.h"

#include <algorithm>

namespace dsinfer::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::Push(std::string_view delta) {
  Result r;
  if (stopped_) {
    r.stopped = true;
    return r;
  }
  held_.append(delta);
  // Earliest match; on a tie at one position the longer stop string wins.
  size_t best = std::string::npos;
  int best_index = -1;
  for (size_t k = 0; k < stops_.size(); ++k) {
    const size_t p = held_.find(stops_[k]);
    if (p != std::string::npos &&
        (p < best || (p == best && stops_[k].size() > stops_[static_cast<size_t>(best_index)].size()))) {
      best = p;
      best_index = static_cast<int>(k);
    }
  }
  if (best != std::string::npos) {
    r.text = held_.substr(0, best);
    r.stopped = true;
    r.stop_index = best_index;
    stopped_ = true;
    held_.clear();
    return r;
  }
  // Longest suffix of held_ that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopStringMatcher::Finish() {
  std::string out = stopped_ ? std::string() : held_;
  held_.clear();
  return out;
}

}  // namespace dsinfer::tokenizer
