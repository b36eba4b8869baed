// RegexCompiler: an ECMAScript-style regular expression (the dialect of JSON Schema's `pattern`)
// into the grammar form. Supported: literals, escapes (\d \w \s \D \W \S \n \t \r \f \v \0 \xHH
// \uHHHH and escaped punctuation), classes [...] / [^...] with ranges, '.', groups (...), (?:...),
// (?<name>...), alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same
// language), '^' / '$' at the ends of top-level branches; \D \W \S and negated classes of them
// match ASCII only (valid under ECMAScript and Unicode readings alike). Unsupported (an
// Unimplemented error naming it): backreferences, lookaround, \b / \B, \p{...}, inline flags,
// anchors elsewhere. Pure function of its inputs.
#pragma once

#include <string_view>

#include "base/status.h"
#include "structured/code_points.h"
#include "structured/grammar.h"

namespace dsinfer::structured {

enum class RegexMode {
  kFullMatch,    // the output's UTF-8 text is one whole match (^ and $ are implied)
  kJsonPattern,  // JSON Schema `pattern`: matched inside the string's decoded value (search
                 // semantics: an unanchored side may hold any characters), written JSON-escaped
};

// The language of `pattern` as one element of `b`. Repetition bounds above `max_repeat` are an
// InvalidArgument (they would explode the grammar). kJsonPattern writes the members of
// `json_escaped` only as \uxxxx escapes (code_points.h: JsonCharElement).
StatusOr<Element> CompileRegex(GrammarBuilder& b, std::string_view pattern, RegexMode mode,
                               int64_t max_repeat = 10000,
                               const CodePointSet& json_escaped = CodePointSet());

}  // namespace dsinfer::structured
