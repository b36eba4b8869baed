#include "structured/json_number.h"

#include <cmath>
#include <string>

namespace dsinfer::structured {

namespace {

Element Digit(GrammarBuilder& b) { return b.Bytes(ByteSet::Range('0', '9')); }

// Decimal strings of equal length between x and y (x <= y), digit by digit.
std::vector<Element> SameLength(GrammarBuilder& b, const std::string& x, const std::string& y) {
  if (x.empty()) return {};
  if (x == y) return b.LiteralSeq(x);
  const std::string xr = x.substr(1), yr = y.substr(1);
  std::vector<Element> seq;
  if (x[0] == y[0]) {
    seq.push_back(b.Byte(static_cast<uint8_t>(x[0])));
    for (Element e : SameLength(b, xr, yr)) seq.push_back(e);
    return seq;
  }
  const bool all_low = xr.find_first_not_of('0') == std::string::npos;
  const bool all_high = yr.find_first_not_of('9') == std::string::npos;
  std::vector<std::vector<Element>> alts;
  char from = x[0], to = y[0];
  if (!all_low) {
    std::vector<Element> a = {b.Byte(static_cast<uint8_t>(x[0]))};
    for (Element e : SameLength(b, xr, std::string(xr.size(), '9'))) a.push_back(e);
    alts.push_back(std::move(a));
    ++from;
  }
  if (!all_high) {
    std::vector<Element> a = {b.Byte(static_cast<uint8_t>(y[0]))};
    for (Element e : SameLength(b, std::string(yr.size(), '0'), yr)) a.push_back(e);
    alts.push_back(std::move(a));
    --to;
  }
  if (from <= to) {
    std::vector<Element> a = {
        b.Bytes(ByteSet::Range(static_cast<uint8_t>(from), static_cast<uint8_t>(to)))};
    for (size_t i = 0; i < xr.size(); ++i) a.push_back(Digit(b));
    alts.push_back(std::move(a));
  }
  return {b.Choice(std::move(alts), "digits")};
}

// Non-negative integers in [lo, hi] without leading zeros; alternatives appended to `alts`.
void NonNegative(GrammarBuilder& b, int64_t lo, int64_t hi, std::vector<std::vector<Element>>* alts,
                 const std::vector<Element>& prefix) {
  int64_t low_of_len = 0, high_of_len = 9;
  for (int len = 1; len <= 15 && low_of_len <= hi; ++len) {
    const int64_t a = std::max(lo, low_of_len), z = std::min(hi, high_of_len);
    if (a <= z) {
      std::vector<Element> seq = prefix;
      for (Element e : SameLength(b, std::to_string(a), std::to_string(z))) seq.push_back(e);
      alts->push_back(std::move(seq));
    }
    low_of_len = high_of_len + 1;
    high_of_len = high_of_len * 10 + 9;
  }
}

struct IntRange {
  int64_t lo, hi;
};

StatusOr<IntRange> IntegerRange(const NumberBounds& bounds) {
  double lo = -static_cast<double>(kMaxGeneratedInteger),
         hi = static_cast<double>(kMaxGeneratedInteger);
  for (const auto& [v, exclusive, is_lo] : {std::tuple{bounds.lo, bounds.lo_exclusive, true},
                                            std::tuple{bounds.hi, bounds.hi_exclusive, false}}) {
    if (!v) continue;
    if (!std::isfinite(*v)) return InvalidArgument("a numeric bound is not finite");
    if (std::fabs(*v) > static_cast<double>(kMaxGeneratedInteger) + 1) {
      return Unimplemented("numeric bounds beyond 15 digits (" + std::to_string(*v) + ")");
    }
    if (is_lo) {
      lo = exclusive ? std::floor(*v) + 1 : std::ceil(*v);
    } else {
      hi = exclusive ? std::ceil(*v) - 1 : std::floor(*v);
    }
  }
  lo = std::max(lo, -static_cast<double>(kMaxGeneratedInteger));
  hi = std::min(hi, static_cast<double>(kMaxGeneratedInteger));
  return IntRange{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

void IntegerAlts(GrammarBuilder& b, IntRange r, std::vector<std::vector<Element>>* alts) {
  if (r.lo > r.hi) return;
  if (r.lo < 0) NonNegative(b, std::max<int64_t>(1, -r.hi), -r.lo, alts, {b.Byte('-')});
  if (r.hi >= 0) NonNegative(b, std::max<int64_t>(0, r.lo), r.hi, alts, {});
}

}  // namespace

StatusOr<Element> IntegerElement(GrammarBuilder& b, const NumberBounds& bounds) {
  DSINFER_ASSIGN_OR_RETURN(IntRange r, IntegerRange(bounds));
  std::vector<std::vector<Element>> alts;
  IntegerAlts(b, r, &alts);
  if (alts.empty()) return InvalidArgument("no integer satisfies the schema's minimum/maximum");
  return b.Choice(std::move(alts), "integer");
}

StatusOr<Element> NumberElement(GrammarBuilder& b, const NumberBounds& bounds) {
  DSINFER_ASSIGN_OR_RETURN(IntRange r, IntegerRange(bounds));
  std::vector<std::vector<Element>> alts;
  IntegerAlts(b, r, &alts);
  // Fractions m.f with 0 <= f < 1: every value between m and m + 1 must be inside the bounds.
  const Element frac = b.Seq({b.Byte('.'), b.Repeat(Digit(b), 1, 6)}, "fraction");
  const int64_t cap = kMaxGeneratedInteger;
  const int64_t pos_hi = bounds.hi ? static_cast<int64_t>(std::floor(*bounds.hi)) - 1 : cap;
  const int64_t pos_lo = std::max<int64_t>(0, r.lo);
  std::vector<std::vector<Element>> pos;
  NonNegative(b, pos_lo, std::min(pos_hi, cap), &pos, {});
  for (auto& a : pos) {
    a.push_back(frac);
    alts.push_back(std::move(a));
  }
  const int64_t neg_hi = bounds.lo ? static_cast<int64_t>(std::floor(-*bounds.lo)) - 1 : cap;
  const int64_t neg_lo = std::max<int64_t>(0, -r.hi);
  std::vector<std::vector<Element>> neg;
  NonNegative(b, neg_lo, std::min(neg_hi, cap), &neg, {b.Byte('-')});
  for (auto& a : neg) {
    a.push_back(frac);
    alts.push_back(std::move(a));
  }
  if (alts.empty()) return InvalidArgument("no number satisfies the schema's minimum/maximum");
  return b.Choice(std::move(alts), "number");
}

}  // namespace dsinfer::structured
