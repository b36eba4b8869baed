// PrefixIndex: which states the prefix cache holds, keyed by the tokens they were computed from.
// A checkpoint is a frozen copy of a sequence's whole state (rings, compressor rows and the
// entry lists) after its first `length` tokens, held in the state cache under its own id; a new
// sequence whose tokens start with a checkpoint's restores it and computes only the rest — the
// bits are those of a cold run, since the model is chunking-invariant. Lookup keys are chains of
// 128-token block hashes (the model identity and dialect are the cache's salt), and a candidate's
// tokens are compared in full, so a hash collision never restores a wrong state. Eviction is
// least-recently-used. Model-agnostic bookkeeping only: the engine copies the states. Not
// thread-safe: the engine thread's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

namespace dsinfer::cache {

class PrefixIndex {
 public:
  static constexpr int64_t kBlock = 128;

  explicit PrefixIndex(uint64_t salt = 0) : salt_(salt) {}

  struct Hit {
    uint64_t id = 0;     // the checkpoint's state cache id
    int64_t length = 0;  // tokens it holds
  };
  // The longest checkpoint whose tokens are a prefix of `tokens` and whose length is at most
  // `max_length`; marks it used.
  std::optional<Hit> Lookup(const std::vector<int32_t>& tokens, int64_t max_length);
  // Whether a checkpoint of exactly tokens[0, length) is held.
  bool Contains(const std::vector<int32_t>& tokens, int64_t length) const;
  // Records checkpoint `id` of tokens[0, length).
  void Insert(uint64_t id, const std::vector<int32_t>& tokens, int64_t length);
  // The least recently used checkpoint other than `keep` and those `skip` is true of (to evict),
  // or nothing; Erase removes one.
  std::optional<uint64_t> LeastRecentlyUsed(
      uint64_t keep = 0, const std::function<bool(uint64_t)>& skip = nullptr) const;
  void Erase(uint64_t id);
  std::vector<uint64_t> Ids() const;
  // The tokens of checkpoint `id` (which must be held).
  const std::vector<int32_t>& tokens(uint64_t id) const { return entries_.at(id).tokens; }
  bool Holds(uint64_t id) const { return entries_.count(id) > 0; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // tokens[0, length)
    uint64_t key = 0;             // BlockKey of its whole blocks
    uint64_t last_used = 0;
  };
  // The hash chain of tokens' first `blocks` whole blocks.
  uint64_t BlockKey(const std::vector<int32_t>& tokens, int64_t blocks) const;
  // BlockKey of 0 .. `blocks` whole blocks, in one pass.
  std::vector<uint64_t> BlockKeys(const std::vector<int32_t>& tokens, int64_t blocks) const;

  uint64_t salt_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;         // by checkpoint id
  std::unordered_multimap<uint64_t, uint64_t> by_key_;  // block key -> checkpoint id
};

}  // namespace dsinfer::cache
