// Grammars of JSON numbers within bounds: integers in [lo, hi] written without leading zeros
// (exact digit automata), and numbers whose value lies in a range (the integer-valued ones exactly,
// plus fractions m.f whose every value is inside the range). Generated numbers have at most 15
// integer digits, at most 6 fraction digits and no exponent: a subset of valid JSON numbers, so
// every output satisfies the bounds. Pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "base/status.h"
#include "structured/grammar.h"

namespace dsinfer::structured {

constexpr int64_t kMaxGeneratedInteger = 999999999999999;  // 15 digits

struct NumberBounds {
  std::optional<double> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
};

// Integers satisfying `bounds` (InvalidArgument if none, or a bound beyond 15 digits).
StatusOr<Element> IntegerElement(GrammarBuilder& b, const NumberBounds& bounds);
// Numbers satisfying `bounds`.
StatusOr<Element> NumberElement(GrammarBuilder& b, const NumberBounds& bounds);

}  // namespace dsinfer::structured
