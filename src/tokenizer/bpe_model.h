// BpeModel: the byte-level BPE `model` of tokenizer.json: vocab (token -> id), merges (rank =
// index), and the merge loop that turns one pre-tokenized piece into ids: start from single bytes,
// repeatedly merge the adjacent pair of lowest rank (leftmost first on ties) until none applies
// (recipe-v4.md §4.3). Works on raw bytes, not on the byte-level strings: vocab keys are mapped
// back to bytes at load time.
// Immutable after Create(); thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace dsinfer::tokenizer {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object (type BPE).
  static StatusOr<std::unique_ptr<BpeModel>> Create(const nlohmann::json& model);

  // Appends the ids of `piece` (raw bytes of one pre-tokenized piece) to `out`.
  void Encode(std::string_view piece, std::vector<int32_t>* out) const;

  // Number of vocab entries (the largest vocab id + 1).
  int32_t vocab_end() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The byte-level spelling of vocab id `id` ("" if the id is not in the vocab).
  const std::string& TokenOf(int32_t id) const { return id_to_token_[static_cast<size_t>(id)]; }
  // Vocab id of a byte-level spelling, or -1.
  int32_t IdOf(const std::string& byte_level_token) const;

 private:
  struct MergeEntry {
    uint64_t key = ~0ull;  // (left << 32) | right; ~0 = empty slot
    int32_t rank = 0;
    int32_t result = 0;
  };

  // Rank and result of merging (left, right), or false.
  bool FindMerge(int32_t left, int32_t right, int32_t* rank, int32_t* result) const {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                         static_cast<uint32_t>(right);
    size_t h = Hash(key) & mask_;
    while (true) {
      const MergeEntry& e = merges_[h];
      if (e.key == key) {
        *rank = e.rank;
        *result = e.result;
        return true;
      }
      if (e.key == ~0ull) return false;
      h = (h + 1) & mask_;
    }
  }
  static size_t Hash(uint64_t k) {
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 32;
    return static_cast<size_t>(k);
  }
  void EncodeShort(std::vector<int32_t>& symbols) const;
  void EncodeLong(std::vector<int32_t>& symbols) const;

  std::vector<std::string> id_to_token_;                // byte-level spellings
  std::unordered_map<std::string, int32_t> token_to_id_; // byte-level spelling -> id
  std::unordered_map<std::string, int32_t> bytes_to_id_; // raw bytes -> id (ignore_merges lookups)
  int32_t byte_id_[256] = {};                            // id of each single byte
  std::vector<MergeEntry> merges_;                       // open-addressing table
  size_t mask_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace dsinfer::tokenizer
