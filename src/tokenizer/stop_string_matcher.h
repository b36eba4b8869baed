// StopStringMatcher: finds stop strings in streamed text even when they span token (delta)
// boundaries. Push() returns the text that is safe to emit: it holds back the longest tail that is
// a prefix of some stop string, and on a match returns the text before the stop string and
// reports it. After a stop, further input is ignored.
// One per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsinfer::tokenizer {

class StopStringMatcher {
 public:
  struct Result {
    std::string text;     // safe to emit now
    bool stopped = false;
    int stop_index = -1;  // which stop string matched
  };

  // Empty stop strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  Result Push(std::string_view delta);
  // End of stream: releases the held-back text.
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace dsinfer::tokenizer
