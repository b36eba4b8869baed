#include "speculative/ngram.h"

#include <algorithm>

namespace dsinfer::speculative {

std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, int k,
                                  const NgramOptions& options) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || len < 2) return {};
  for (int64_t n = std::min<int64_t>(options.max_n, len - 1); n >= std::max(1, options.min_n);
       --n) {
    const int32_t* suffix = tokens.data() + len - n;
    // The latest occurrence that starts before the suffix itself: [j, j + n) with j + n < len.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (tokens[j + n - 1] != suffix[n - 1] || !std::equal(suffix, suffix + n, tokens.data() + j))
        continue;
      const int64_t from = j + n, to = std::min<int64_t>(len, from + k);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

}  // namespace dsinfer::speculative
