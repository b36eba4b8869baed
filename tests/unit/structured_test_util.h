// Helpers for structured-output tests: a small synthetic vocabulary (every byte, common ASCII
// words and JSON punctuation pieces) and a driver that checks a string against a constraint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "structured/constraint_compiler.h"
#include "structured/matcher.h"

namespace dsinfer::testing {

// Ids 0..255: single bytes; then multi-byte pieces; the last id is EOS.
inline std::shared_ptr<const structured::Vocabulary> TestVocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* piece :
         {"{\"",      "\":", "\": ", ", \"", "\"}",   "true", "false", "null",     "ab",
          "abc",      "12",  "123",  "\",",  "},",    "[{",   "}]",    "  ",       "name",
          "\"name\"", "-0",  ".5",   "\\n",  "\\u00", "é",    "日本",  "\xe6\x97", "\xa5"}) {
      bytes.push_back(piece);
    }
    // Tokens longer than kCounterWindow (16) bytes, and ones around it, for bounded repetitions.
    for (int n : {15, 16, 17, 18, 24, 40}) {
      bytes.push_back(std::string(static_cast<size_t>(n), 'a'));
      bytes.push_back(std::string(static_cast<size_t>(n - 1), 'b') + "\"");
      bytes.push_back("\",\"" + std::string(static_cast<size_t>(n - 3), 'c'));
    }
    bytes.push_back("日本日本日本日本日本日本");  // 36 bytes, 12 characters
    bytes.push_back("");                          // EOS (no bytes)
    const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
    return structured::Vocabulary::Create(bytes, static_cast<int64_t>(bytes.size()) + 3, eos);
  }();
  return vocab;
}

inline std::shared_ptr<structured::TokenAutomaton> Compile(const structured::ConstraintSpec& spec) {
  auto a = structured::CompileConstraint(spec, TestVocabulary());
  if (!a.ok()) throw std::runtime_error(a.status().ToString());
  return *a;
}

inline structured::ConstraintSpec Spec(structured::ConstraintKind kind, std::string text) {
  structured::ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  return s;
}

// Whether `text` is a complete match (fed byte by byte through the automaton).
inline bool Matches(structured::TokenAutomaton& a, const std::string& text) {
  const int32_t c = a.AdvanceBytes(a.initial(), text);
  return c != structured::Pda::kDead && a.accepting(c);
}

}  // namespace dsinfer::testing
