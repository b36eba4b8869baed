// IncrementalDetokenizer: emits the longest prefix of the pending bytes whose UTF-8 status is
// settled (valid characters, and invalid subsequences as U+FFFD); keeps an incomplete tail.
#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/utf8.h"

namespace dsinfer::tokenizer {

std::string IncrementalDetokenizer::Add(int32_t id) {
  if (!tokenizer_->IsKnownId(id) || (skip_special_ && tokenizer_->IsSpecial(id))) return "";
  pending_ += tokenizer_->TokenBytes(id);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t bad = 0;
    const int len = Utf8SequenceLength(pending_, i, &bad);
    if (len > 0) {
      out.append(pending_, i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else if (len < 0) {
      break;  // may still complete: hold it
    } else {
      out.append(kReplacementChar);
      i += bad;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::Add(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += Add(id);
  return out;
}

std::string IncrementalDetokenizer::Finish() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacementChar);
  pending_.clear();
  return out;
}

}  // namespace dsinfer::tokenizer
