// BpeModel: loading and the merge loop. Short pieces use a quadratic scan (fast for the usual
// 1-10 bytes); long ones a heap of candidate pairs with lazy invalidation, O(n log n), so a long
// run of one character cannot make encoding quadratic.
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/byte_level.h"

namespace dsinfer::tokenizer {

namespace {
constexpr size_t kShortPiece = 48;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(const nlohmann::json& model) {
  if (!model.is_object() || model.value("type", "BPE") != "BPE") {
    return Unimplemented("tokenizer.json: only a BPE model is supported");
  }
  auto null_or = [&](const char* key) { return !model.contains(key) || model[key].is_null(); };
  if (!null_or("dropout")) return Unimplemented("tokenizer.json: BPE dropout");
  if (!null_or("continuing_subword_prefix") && model["continuing_subword_prefix"] != "") {
    return Unimplemented("tokenizer.json: BPE continuing_subword_prefix");
  }
  if (!null_or("end_of_word_suffix") && model["end_of_word_suffix"] != "") {
    return Unimplemented("tokenizer.json: BPE end_of_word_suffix");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return DataLoss("tokenizer.json: model.vocab is missing");
  }
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->ignore_merges_ = model.value("ignore_merges", false);
  const auto& vocab = model["vocab"];
  int64_t max_id = -1;
  for (const auto& [tok, idv] : vocab.items()) {
    if (!idv.is_number_integer()) return DataLoss("tokenizer.json: vocab id is not an integer");
    max_id = std::max<int64_t>(max_id, idv.get<int64_t>());
  }
  if (max_id < 0 || max_id > (int64_t{1} << 30)) return DataLoss("tokenizer.json: bad vocab ids");
  m->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  m->token_to_id_.reserve(vocab.size());
  for (const auto& [tok, idv] : vocab.items()) {
    const int64_t id = idv.get<int64_t>();
    if (id < 0) return DataLoss("tokenizer.json: negative vocab id");
    m->id_to_token_[static_cast<size_t>(id)] = tok;
    m->token_to_id_[tok] = static_cast<int32_t>(id);
    if (auto bytes = ByteLevelToBytes(tok)) m->bytes_to_id_[*bytes] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    const int32_t id = m->IdOf(BytesToByteLevel(std::string(1, static_cast<char>(b))));
    if (id < 0) return DataLoss("tokenizer.json: the vocab lacks the byte-level token of byte " + std::to_string(b));
    m->byte_id_[b] = id;
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return DataLoss("tokenizer.json: model.merges is missing");
  }
  const auto& merges = model["merges"];
  size_t cap = 16;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  m->merges_.assign(cap, MergeEntry());
  m->mask_ = cap - 1;
  int32_t rank = 0;
  for (const auto& mj : merges) {
    std::string a, b;
    if (mj.is_string()) {
      const std::string s = mj.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return DataLoss("tokenizer.json: merge '" + s + "' has no space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      a = mj[0].get<std::string>();
      b = mj[1].get<std::string>();
    } else {
      return DataLoss("tokenizer.json: malformed merge entry");
    }
    const int32_t ia = m->IdOf(a), ib = m->IdOf(b), ir = m->IdOf(a + b);
    if (ia < 0 || ib < 0 || ir < 0) {
      return DataLoss("tokenizer.json: merge '" + a + " " + b + "' uses a token missing from the vocab");
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia)) << 32) | static_cast<uint32_t>(ib);
    size_t h = Hash(key) & m->mask_;
    while (m->merges_[h].key != ~0ull && m->merges_[h].key != key) h = (h + 1) & m->mask_;
    if (m->merges_[h].key == ~0ull) {  // first occurrence wins, as in Hugging Face
      m->merges_[h] = MergeEntry{key, rank, ir};
    }
    ++rank;
  }
  return m;
}

int32_t BpeModel::IdOf(const std::string& byte_level_token) const {
  auto it = token_to_id_.find(byte_level_token);
  return it == token_to_id_.end() ? -1 : it->second;
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(std::string(piece));
    if (it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  for (unsigned char c : piece) symbols.push_back(byte_id_[c]);
  if (symbols.size() <= kShortPiece) {
    EncodeShort(symbols);
  } else {
    EncodeLong(symbols);
  }
  out->insert(out->end(), symbols.begin(), symbols.end());
}

void BpeModel::EncodeShort(std::vector<int32_t>& s) const {
  // ranks[i] = rank of merging s[i], s[i+1] (INT32_MAX if none).
  int32_t ranks[kShortPiece];
  int32_t results[kShortPiece];
  size_t n = s.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    if (!FindMerge(s[i], s[i + 1], &ranks[i], &results[i])) ranks[i] = INT32_MAX;
  }
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == INT32_MAX) break;
    s[best] = results[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      s[i] = s[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --n;
    if (best + 1 < n) {
      if (!FindMerge(s[best], s[best + 1], &ranks[best], &results[best])) ranks[best] = INT32_MAX;
    }
    if (best > 0) {
      if (!FindMerge(s[best - 1], s[best], &ranks[best - 1], &results[best - 1])) {
        ranks[best - 1] = INT32_MAX;
      }
    }
  }
  s.resize(n);
}

void BpeModel::EncodeLong(std::vector<int32_t>& s) const {
  const size_t n = s.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos, left, right, result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t i) {
    if (i < 0) return;
    const int32_t j = next[static_cast<size_t>(i)];
    if (j < 0) return;
    int32_t rank, result;
    if (FindMerge(s[static_cast<size_t>(i)], s[static_cast<size_t>(j)], &rank, &result)) {
      heap.push(Cand{rank, i, s[static_cast<size_t>(i)], s[static_cast<size_t>(j)], result});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const auto i = static_cast<size_t>(c.pos);
    if (!alive[i] || s[i] != c.left) continue;
    const int32_t j = next[i];
    if (j < 0 || s[static_cast<size_t>(j)] != c.right) continue;
    s[i] = c.result;
    alive[static_cast<size_t>(j)] = false;
    next[i] = next[static_cast<size_t>(j)];
    if (next[i] >= 0) prev[static_cast<size_t>(next[i])] = static_cast<int32_t>(i);
    push(prev[i]);
    push(static_cast<int32_t>(i));
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) s[w++] = s[i];
  }
  s.resize(w);
}

}  // namespace dsinfer::tokenizer
