// N-gram (prompt lookup) drafting: the tokens that followed the latest earlier occurrence of the
// sequence's last n tokens, for n from max_n down to min_n (the longest match wins). Pure
// function of the token list, so drafts are deterministic.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::speculative {

struct NgramOptions {
  int min_n = 1;  // shortest suffix matched
  int max_n = 4;  // longest suffix tried first
};

// Up to `k` drafts to follow `tokens` (prompt and output so far); empty when no suffix recurs.
std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, int k,
                                  const NgramOptions& options);

}  // namespace dsinfer::speculative
