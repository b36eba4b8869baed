// PreTokenizer: Hugging Face's pre-tokenization for the byte-level BPE family, i.e. the
// `pre_tokenizer` of tokenizer.json: a Sequence of Split(Regex, behavior) steps and one ByteLevel
// step (DeepSeek V3/V4), or a lone ByteLevel(use_regex=true) (GPT-2). Regexes run on PCRE2 (JIT) in
// UTF + UCP mode; `\s`/`\S` are rewritten to the Unicode White_Space property, which is what
// Oniguruma (the engine Hugging Face uses) means by them and PCRE2 does not (U+0085). Regexes match
// against each piece alone, so look-aheads never see past a piece (recipe-v4.md §4.2).
// Immutable after Create(); Split() is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace dsinfer::tokenizer {

class PreTokenizer {
 public:
  // `config` is tokenizer.json's "pre_tokenizer" object.
  static StatusOr<std::unique_ptr<PreTokenizer>> Create(const nlohmann::json& config);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Calls `emit` with each final piece of `text` (raw UTF-8 bytes, before the byte-level mapping),
  // in order. `text` must be valid UTF-8.
  void Split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

  // `pattern` with \s and \S rewritten to \p{White_Space} / \P{White_Space} (exposed for tests).
  static std::string TranslateRegex(std::string_view pattern);

 private:
  struct Step;
  PreTokenizer();
  void RunStep(size_t step, std::string_view piece, void* match_data_list,
               const std::function<void(std::string_view)>& emit) const;

  std::vector<Step> steps_;
};

}  // namespace dsinfer::tokenizer
