#include "structured/regex_compiler.h"

#include <string>

#include "structured/code_points.h"

namespace dsinfer::structured {

namespace {

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, RegexMode mode, int64_t max_repeat,
              const CodePointSet& json_escaped)
      : b_(b), p_(p), mode_(mode), max_repeat_(max_repeat), json_escaped_(json_escaped) {}

  StatusOr<Element> Parse() {
    std::vector<std::vector<Element>> branches;
    do {
      bool anchored_start = false, anchored_end = false;
      if (Peek('^')) {
        ++i_;
        anchored_start = true;
      }
      DSINFER_ASSIGN_OR_RETURN(std::vector<Element> seq, Concat(/*top=*/true, &anchored_end));
      if (mode_ == RegexMode::kJsonPattern) {
        if (!anchored_start) seq.insert(seq.begin(), AnyStar());
        if (!anchored_end) seq.push_back(AnyStar());
      }
      branches.push_back(std::move(seq));
    } while (Eat('|'));
    if (i_ < p_.size()) return Error("unbalanced ')'");
    DSINFER_RETURN_IF_ERROR(b_.status());
    return b_.Choice(std::move(branches), "regex");
  }

 private:
  bool Peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++i_;
    return true;
  }
  Status Error(const std::string& what) const {
    return InvalidArgument("bad regex at offset " + std::to_string(i_) + ": " + what + " in /" +
                           std::string(p_) + "/");
  }
  Status Unsupported(const std::string& what) const {
    return Unimplemented("regex feature not supported: " + what + " in /" + std::string(p_) + "/");
  }
  Element Char(const CodePointSet& s) {
    return mode_ == RegexMode::kJsonPattern ? JsonCharElement(b_, s, json_escaped_)
                                            : Utf8Element(b_, s);
  }
  Element AnyStar() {
    if (!any_star_) any_star_ = b_.Star(Char(CodePointSet::All()));
    return *any_star_;
  }

  StatusOr<std::vector<Element>> Concat(bool top, bool* anchored_end) {
    std::vector<Element> seq;
    while (i_ < p_.size() && !Peek('|') && !Peek(')')) {
      if (Peek('$')) {
        ++i_;
        if (top && (i_ == p_.size() || Peek('|'))) {
          *anchored_end = true;
          break;
        }
        return Unsupported("'$' inside the pattern");
      }
      DSINFER_ASSIGN_OR_RETURN(Element atom, Atom());
      DSINFER_ASSIGN_OR_RETURN(atom, Quantified(atom));
      seq.push_back(atom);
    }
    return seq;
  }

  StatusOr<Element> Quantified(Element atom) {
    while (i_ < p_.size()) {
      int64_t lo = 0, hi = -1;
      const size_t at = i_;
      if (Eat('*')) {
      } else if (Eat('+')) {
        lo = 1;
      } else if (Eat('?')) {
        hi = 1;
      } else if (Peek('{')) {
        size_t j = i_ + 1;
        auto number = [&](int64_t* out) {
          const size_t s = j;
          int64_t v = 0;
          while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v <= max_repeat_)
            v = v * 10 + (p_[j++] - '0');
          *out = v;
          return j > s;
        };
        if (!number(&lo)) return atom;  // a literal '{' (ECMAScript's Annex B reading)
        if (j < p_.size() && p_[j] == ',') {
          ++j;
          if (!number(&hi)) hi = -1;
        } else {
          hi = lo;
        }
        if (j >= p_.size() || p_[j] != '}') return atom;
        i_ = j + 1;
        if (lo > max_repeat_ || hi > max_repeat_) {
          return Error("repetition bound above " + std::to_string(max_repeat_));
        }
        if (hi >= 0 && hi < lo) return Error("repetition {m,n} with n < m");
      } else {
        return atom;
      }
      (void)at;
      Eat('?');  // lazy: the same language
      if (Peek('*') || Peek('+')) return Unsupported("possessive or doubled quantifier");
      atom = hi == 1 && lo == 0 ? b_.Optional(atom) : b_.Repeat(atom, lo, hi);
    }
    return atom;
  }

  StatusOr<uint32_t> Utf8Char() {
    const auto c0 = static_cast<uint8_t>(p_[i_]);
    int n = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + n > p_.size()) return Error("invalid UTF-8");
    uint32_t c = n == 1 ? c0 : c0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto ck = static_cast<uint8_t>(p_[i_ + k]);
      if ((ck & 0xC0) != 0x80) return Error("invalid UTF-8");
      c = c << 6 | (ck & 0x3F);
    }
    i_ += n;
    return c;
  }

  StatusOr<uint32_t> Hex(int digits) {
    if (i_ + digits > p_.size()) return Error("short hex escape");
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = p_[i_++];
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) return Error("bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // \D \W \S and negated classes holding \d \w \s match ASCII only: a subset of both the
  // ECMAScript reading (ASCII classes) and the Unicode one of Python-style validators, so an output
  // is valid under either.
  static CodePointSet AsciiComplement(const CodePointSet& s) {
    CodePointSet ascii;
    ascii.Add(0, 0x7F);
    return ascii.Minus(s);
  }

  // After a backslash: a class escape (\d ...) into `set`, or one character.
  Status Escape(CodePointSet* set, bool in_class) {
    if (i_ >= p_.size()) return Error("trailing backslash");
    const char c = p_[i_++];
    CodePointSet s;
    if (std::string_view("dDwWsS").find(c) != std::string_view::npos) saw_shorthand_ = true;
    switch (c) {
      case 'd':
        s.Add('0', '9');
        break;
      case 'D':
        s.Add('0', '9');
        s = AsciiComplement(s);
        break;
      case 'w':
        s.Add('a', 'z');
        s.Add('A', 'Z');
        s.Add('0', '9');
        s.Add('_', '_');
        break;
      case 'W':
        s.Add('a', 'z');
        s.Add('A', 'Z');
        s.Add('0', '9');
        s.Add('_', '_');
        s = AsciiComplement(s);
        break;
      case 's':
      case 'S':
        s.Add('\t', '\r');
        s.Add(' ', ' ');
        s.Add(0xA0, 0xA0);
        s.Add(0x1680, 0x1680);
        s.Add(0x2000, 0x200A);
        s.Add(0x2028, 0x2029);
        s.Add(0x202F, 0x202F);
        s.Add(0x205F, 0x205F);
        s.Add(0x3000, 0x3000);
        if (c == 'S') s = AsciiComplement(s);
        break;
      case 'n':
        s = CodePointSet::Of('\n');
        break;
      case 't':
        s = CodePointSet::Of('\t');
        break;
      case 'r':
        s = CodePointSet::Of('\r');
        break;
      case 'f':
        s = CodePointSet::Of('\f');
        break;
      case 'v':
        s = CodePointSet::Of('\v');
        break;
      case '0':
        s = CodePointSet::Of(0);
        break;
      case 'x': {
        DSINFER_ASSIGN_OR_RETURN(uint32_t v, Hex(2));
        s = CodePointSet::Of(v);
        break;
      }
      case 'u': {
        if (Eat('{')) return Unsupported("\\u{...} escape");
        DSINFER_ASSIGN_OR_RETURN(uint32_t v, Hex(4));
        if (v >= 0xD800 && v <= 0xDFFF)
          return Unsupported("surrogate escape \\u" + std::to_string(v));
        s = CodePointSet::Of(v);
        break;
      }
      case 'b':
        if (in_class) {
          s = CodePointSet::Of('\b');
          break;
        }
        return Unsupported("word boundary \\b");
      case 'B':
        return Unsupported("word boundary \\B");
      case 'p':
      case 'P':
        return Unsupported("Unicode property escape \\p{...}");
      case 'k':
        return Unsupported("named backreference \\k");
      case 'c':
        return Unsupported("control escape \\c");
      default:
        if (c >= '1' && c <= '9') return Unsupported("backreference \\" + std::string(1, c));
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return Error("unknown escape \\" + std::string(1, c));
        }
        --i_;
        DSINFER_ASSIGN_OR_RETURN(uint32_t v, Utf8Char());
        s = CodePointSet::Of(v);
    }
    set->Add(s);
    return Status::Ok();
  }

  StatusOr<Element> Class() {  // after '['
    const bool negate = Eat('^');
    saw_shorthand_ = false;
    CodePointSet set;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) return Error("unterminated character class");
      if (Peek(']') && !first) {
        ++i_;
        break;
      }
      first = false;
      CodePointSet item;
      if (Eat('\\')) {
        DSINFER_RETURN_IF_ERROR(Escape(&item, /*in_class=*/true));
      } else {
        DSINFER_ASSIGN_OR_RETURN(uint32_t c, Utf8Char());
        item = CodePointSet::Of(c);
      }
      // A range a-b (both single characters).
      if (Peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']' && item.ranges().size() == 1 &&
          item.ranges()[0].first == item.ranges()[0].second) {
        ++i_;
        CodePointSet hi_item;
        if (Eat('\\')) {
          DSINFER_RETURN_IF_ERROR(Escape(&hi_item, true));
        } else {
          DSINFER_ASSIGN_OR_RETURN(uint32_t c, Utf8Char());
          hi_item = CodePointSet::Of(c);
        }
        if (hi_item.ranges().size() != 1 ||
            hi_item.ranges()[0].first != hi_item.ranges()[0].second) {
          return Error("a class escape cannot end a range");
        }
        const uint32_t lo = item.ranges()[0].first, hi = hi_item.ranges()[0].first;
        if (hi < lo) return Error("range out of order");
        item = CodePointSet();
        item.Add(lo, hi);
      }
      set.Add(item);
    }
    if (negate) set = saw_shorthand_ ? AsciiComplement(set) : set.Complement();
    if (set.empty()) return Error("empty character class");
    return Char(set);
  }

  StatusOr<Element> Atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (Eat('?')) {
        if (Eat(':')) {
        } else if (Peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (!Eat('>')) return Error("unterminated group name");
        } else if (Peek('=') || Peek('!') || Peek('<')) {
          return Unsupported("lookaround (?=, (?!, (?<=, (?<!");
        } else {
          return Unsupported("inline flags or group syntax (?" +
                             std::string(1, i_ < p_.size() ? p_[i_] : ' '));
        }
      }
      if (++depth_ > 200) return Error("groups nested deeper than 200");
      std::vector<std::vector<Element>> branches;
      do {
        bool unused = false;
        DSINFER_ASSIGN_OR_RETURN(std::vector<Element> seq, Concat(false, &unused));
        branches.push_back(std::move(seq));
      } while (Eat('|'));
      if (!Eat(')')) return Error("missing ')'");
      --depth_;
      return b_.Choice(std::move(branches), "group");
    }
    if (c == '[') {
      ++i_;
      return Class();
    }
    if (c == '.') {
      ++i_;
      CodePointSet s;
      s.Add('\n', '\n');
      s.Add('\r', '\r');
      s.Add(0x2028, 0x2029);
      return Char(s.Complement());
    }
    if (c == '\\') {
      ++i_;
      CodePointSet s;
      DSINFER_RETURN_IF_ERROR(Escape(&s, false));
      return Char(s);
    }
    if (c == '^') return Unsupported("'^' inside the pattern");
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '{') {
      // A '{' that does not start a quantifier is a literal (Annex B).
    }
    DSINFER_ASSIGN_OR_RETURN(uint32_t cp, Utf8Char());
    return Char(CodePointSet::Of(cp));
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexMode mode_;
  int64_t max_repeat_;
  size_t i_ = 0;
  int depth_ = 0;
  bool saw_shorthand_ = false;  // the class being parsed holds \d \w \s (or their negations)
  std::optional<Element> any_star_;
  CodePointSet json_escaped_;
};

}  // namespace

StatusOr<Element> CompileRegex(GrammarBuilder& b, std::string_view pattern, RegexMode mode,
                               int64_t max_repeat, const CodePointSet& json_escaped) {
  RegexParser parser(b, pattern, mode, max_repeat, json_escaped);
  return parser.Parse();
}

}  // namespace dsinfer::structured
