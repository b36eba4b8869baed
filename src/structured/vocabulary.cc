#include "structured/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace dsinfer::structured {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, std::vector<int32_t> order) {
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[a] < token_bytes[b] || (token_bytes[a] == token_bytes[b] && a < b);
  });
  // Sorted strings -> preorder trie: keep the path of the previous string, pop to the common
  // prefix.
  std::vector<uint8_t> byte_ = {0};
  std::vector<uint16_t> depth_ = {0};
  std::vector<int32_t> end_ = {1};
  std::vector<int32_t> owners;  // node of each entry of tok_ids_
  std::vector<int32_t> path = {0};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes[id];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (path.size() > common + 1) {
      end_[path.back()] = static_cast<int32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint16_t>(d + 1));
      end_.push_back(0);
    }
    max_depth_ = std::max<int32_t>(max_depth_, static_cast<int32_t>(s.size()));
    tok_ids_.push_back(id);
    owners.push_back(path.back());
    prev = &s;
  }
  while (!path.empty()) {
    end_[path.back()] = static_cast<int32_t>(byte_.size());
    path.pop_back();
  }
  // tok_ids_ is in preorder of its nodes already (sorted strings); index it per node.
  const int32_t n = static_cast<int32_t>(byte_.size());
  std::vector<int32_t> tok_begin(static_cast<size_t>(n) + 1, 0);
  for (int32_t owner : owners) ++tok_begin[owner + 1];
  std::partial_sum(tok_begin.begin(), tok_begin.end(), tok_begin.begin());
  nodes_.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    nodes_[i] = Node{byte_[i], depth_[i], end_[i], tok_begin[i], tok_begin[i + 1]};
  }
}

std::shared_ptr<const Vocabulary> Vocabulary::Create(const std::vector<std::string>& token_bytes,
                                                     int64_t vocab_size, int32_t eos_id,
                                                     std::vector<int32_t> special_ids) {
  auto v = std::make_shared<Vocabulary>();
  v->bytes_ = token_bytes;
  v->vocab_size_ = std::max<int64_t>(vocab_size, static_cast<int64_t>(token_bytes.size()));
  v->eos_id_ = eos_id;
  // The bytes that stand for special tokens are theirs alone.
  for (std::string& b : v->bytes_) {
    if (std::any_of(b.begin(), b.end(),
                    [](char c) { return static_cast<uint8_t>(c) >= kFirstSpecialTokenByte; })) {
      b.clear();
    }
  }
  special_ids.resize(std::min<size_t>(special_ids.size(), kNumGrammarSpecialTokens));
  for (size_t slot = 0; slot < special_ids.size(); ++slot) {
    const int32_t id = special_ids[slot];
    if (id < 0 || id >= static_cast<int64_t>(v->bytes_.size()) || id == eos_id) {
      special_ids[slot] = -1;
      continue;
    }
    v->bytes_[static_cast<size_t>(id)] =
        std::string(1, static_cast<char>(SpecialTokenByte(static_cast<int>(slot))));
  }
  v->special_ids_ = std::move(special_ids);
  std::vector<int32_t> all, long_ones;
  for (size_t i = 0; i < v->bytes_.size(); ++i) {
    const size_t n = v->bytes_[i].size();
    if (n == 0 || n >= 60000) continue;
    all.push_back(static_cast<int32_t>(i));
    if (n > static_cast<size_t>(kCounterWindow)) long_ones.push_back(static_cast<int32_t>(i));
  }
  v->trie_ = TokenTrie(v->bytes_, std::move(all));
  v->long_trie_ = TokenTrie(v->bytes_, std::move(long_ones));
  return v;
}

std::shared_ptr<const Vocabulary> Vocabulary::FromTokenizer(const tokenizer::Tokenizer& tokenizer,
                                                            int64_t vocab_size, int32_t eos_id) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.id_end()));
  for (int32_t id = 0; id < tokenizer.id_end(); ++id) {
    if (tokenizer.IsKnownId(id)) bytes[id] = tokenizer.TokenBytes(id);
  }
  for (const auto& added : tokenizer.added_tokens()) {
    if (added.id >= 0 && added.id < tokenizer.id_end()) bytes[added.id].clear();
  }
  if (eos_id >= 0 && eos_id < tokenizer.id_end()) bytes[eos_id].clear();
  // Ids the model cannot produce (a tokenizer larger than the model's vocabulary) are never
  // allowed.
  for (int64_t id = vocab_size; id < tokenizer.id_end(); ++id)
    bytes[static_cast<size_t>(id)].clear();
  std::vector<int32_t> special_ids(kNumGrammarSpecialTokens, -1);
  for (const auto& added : tokenizer.added_tokens()) {
    for (int slot = 0; slot < kNumGrammarSpecialTokens; ++slot) {
      if (added.content == kGrammarSpecialTokens[slot] && added.id < vocab_size) {
        special_ids[slot] = added.id;
      }
    }
  }
  return Create(bytes, vocab_size, eos_id, std::move(special_ids));
}

}  // namespace dsinfer::structured
