// GbnfCompiler: an EBNF grammar in the GBNF dialect (llama.cpp / xgrammar) into the grammar
// form. Rules `name ::= alternatives`; elements: "literals" (escapes \n \r \t \\ \" \' \[ \] \xHH
// \uHHHH \UHHHHHHHH), [classes] / [^classes] with ranges, '.', rule names (forward references
// allowed), ( groups ), and the quantifiers * + ? {m} {m,} {m,n}; '#' comments. The start rule is
// `root`. Undefined rules, a missing root and left recursion are InvalidArgument errors.
// Pure function of its inputs.
#pragma once

#include <string_view>

#include "base/status.h"
#include "structured/grammar.h"

namespace dsinfer::structured {

StatusOr<Element> CompileGbnf(GrammarBuilder& b, std::string_view text, int64_t max_repeat = 10000);

}  // namespace dsinfer::structured
