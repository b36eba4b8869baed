// N-gram (prompt lookup) drafting: the tokens that followed the latest earlier occurrence of the
// sequence's last n tokens, for n from max_n down to min_n (the longest match wins). Pure
// function of the token list, so drafts are deterministic.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace dsinfer::speculative {

struct NgramOptions {
  int min_n = 1;  // shortest suffix matched
  int max_n = 4;  // longest suffix tried first
};

// Up to `k` drafts to follow `tokens` (prompt and output so far); empty when no suffix recurs.
std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, int k,
                                  const NgramOptions& options);

// ProposeNgram's drafts for one growing sequence without rescanning it each step: for each n, the
// latest end position of every n-gram seen so far, extended by the tokens appended since the last
// call (O(max_n^2) per new token and per proposal instead of O(length * max_n)). A hash match is
// checked against the tokens; a collision falls back to the scan, so the drafts are always
// ProposeNgram's. A list that got shorter than what was indexed is indexed again.
class NgramIndex {
 public:
  std::vector<int32_t> Propose(const std::vector<int32_t>& tokens, int k,
                               const NgramOptions& options);

 private:
  void Reset(const NgramOptions& options);
  NgramOptions options_{0, 0};
  int64_t indexed_ = 0;  // n-grams ending before this position are in the maps
  std::vector<std::unordered_map<uint64_t, int64_t>> last_end_;  // [n - min_n]: hash -> end
};

}  // namespace dsinfer::speculative
