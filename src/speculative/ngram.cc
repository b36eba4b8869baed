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

namespace {

// The hash of tokens [end - n + 1, end].
uint64_t HashNgram(const int32_t* tokens, int64_t end, int64_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(n);
  for (int64_t i = end - n + 1; i <= end; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

}  // namespace

void NgramIndex::Reset(const NgramOptions& options) {
  options_ = options;
  indexed_ = 0;
  last_end_.assign(static_cast<size_t>(std::max(0, options.max_n - std::max(1, options.min_n) + 1)),
                   {});
}

std::vector<int32_t> NgramIndex::Propose(const std::vector<int32_t>& tokens, int k,
                                         const NgramOptions& options) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (options.min_n != options_.min_n || options.max_n != options_.max_n || len < indexed_ + 1)
    Reset(options);
  const int min_n = std::max(1, options.min_n);
  // Index the n-grams that end before the suffix's last token (ProposeNgram's candidates).
  for (int64_t end = indexed_; end + 1 < len; ++end) {
    for (int n = min_n; n <= options.max_n; ++n) {
      if (end + 1 < n) break;
      last_end_[static_cast<size_t>(n - min_n)][HashNgram(tokens.data(), end, n)] = end;
    }
  }
  indexed_ = std::max<int64_t>(indexed_, len - 1);
  if (k <= 0 || len < 2) return {};
  for (int64_t n = std::min<int64_t>(options.max_n, len - 1); n >= min_n; --n) {
    const auto& map = last_end_[static_cast<size_t>(n - min_n)];
    auto it = map.find(HashNgram(tokens.data(), len - 1, n));
    if (it == map.end()) continue;
    const int64_t end = it->second;
    if (!std::equal(tokens.data() + len - n, tokens.data() + len, tokens.data() + end - n + 1)) {
      // A hash collision: the scan decides (it also finds an earlier true match, if any).
      NgramOptions one{static_cast<int>(n), static_cast<int>(n)};
      auto d = ProposeNgram(tokens, k, one);
      if (!d.empty()) return d;
      continue;
    }
    const int64_t from = end + 1, to = std::min<int64_t>(len, from + k);
    return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
  }
  return {};
}

}  // namespace dsinfer::speculative
