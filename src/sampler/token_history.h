// TokenHistory: what the penalties need to know about one sequence: the set of prompt ids and the
// count of each generated id. Owned by one sequence (one completion); not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dsinfer::sampler {

class TokenHistory {
 public:
  TokenHistory() = default;
  explicit TokenHistory(const std::vector<int32_t>& prompt) : prompt_(prompt.begin(), prompt.end()) {}

  void AddOutput(int32_t id) {
    ++output_counts_[id];
    ++num_output_;
  }
  int num_output() const { return num_output_; }
  const std::unordered_set<int32_t>& prompt() const { return prompt_; }
  const std::unordered_map<int32_t, int>& output_counts() const { return output_counts_; }

 private:
  std::unordered_set<int32_t> prompt_;
  std::unordered_map<int32_t, int> output_counts_;
  int num_output_ = 0;
};

}  // namespace dsinfer::sampler
