#include "structured/gbnf_compiler.h"

#include <map>
#include <string>

#include "structured/code_points.h"

namespace dsinfer::structured {

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  GbnfParser(GrammarBuilder& b, std::string_view t, int64_t max_repeat)
      : b_(b), t_(t), max_repeat_(max_repeat) {}

  StatusOr<Element> Parse() {
    SkipSpace();
    while (i_ < t_.size()) {
      const std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (t_.substr(i_, 3) != "::=") return Error("expected '::=' after '" + name + "'");
      i_ += 3;
      const int32_t rule = RuleId(name);
      if (defined_.count(name)) return Error("rule '" + name + "' is defined twice");
      defined_[name] = true;
      DSINFER_RETURN_IF_ERROR(Alternatives(rule, 0));
      SkipSpace();
    }
    for (const auto& [name, id] : rules_) {
      if (!defined_.count(name))
        return InvalidArgument("grammar rule '" + name + "' is used but not defined");
    }
    if (!defined_.count("root")) return InvalidArgument("the grammar has no 'root' rule");
    DSINFER_RETURN_IF_ERROR(b_.status());
    return GrammarBuilder::Ref(rules_.at("root"));
  }

 private:
  Status Error(const std::string& what) const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    return InvalidArgument("bad grammar at line " + std::to_string(line) + ": " + what);
  }
  void SkipSpace() {
    while (i_ < t_.size()) {
      if (t_[i_] == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }
  std::string Name() {
    const size_t s = i_;
    while (i_ < t_.size() && IsNameChar(t_[i_])) ++i_;
    return std::string(t_.substr(s, i_ - s));
  }
  int32_t RuleId(const std::string& name) {
    auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    const int32_t id = b_.NewRule(name);
    rules_[name] = id;
    return id;
  }
  // At a rule name followed by '::=' (the next definition starts).
  bool AtDefinition() {
    size_t j = i_;
    while (j < t_.size() && IsNameChar(t_[j])) ++j;
    if (j == i_) return false;
    while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t' || t_[j] == '\n' || t_[j] == '\r')) ++j;
    return t_.substr(j, 3) == "::=";
  }

  Status Alternatives(int32_t rule, int depth) {
    if (depth > 100) return Error("groups nested deeper than 100");
    while (true) {
      std::vector<Element> seq;
      DSINFER_RETURN_IF_ERROR(Sequence(&seq, depth));
      b_.AddAlt(rule, std::move(seq));
      SkipSpace();
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        continue;
      }
      return Status::Ok();
    }
  }

  Status Sequence(std::vector<Element>* seq, int depth) {
    while (true) {
      SkipSpace();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || AtDefinition()) return Status::Ok();
      Element atom;
      const char c = t_[i_];
      if (c == '"') {
        ++i_;
        std::vector<Element> lit;
        while (true) {
          if (i_ >= t_.size()) return Error("unterminated string");
          if (t_[i_] == '"') {
            ++i_;
            break;
          }
          DSINFER_ASSIGN_OR_RETURN(uint32_t cp, Char());
          for (char byte : EncodeUtf8(cp)) lit.push_back(b_.Byte(static_cast<uint8_t>(byte)));
        }
        atom = lit.empty() ? b_.Epsilon() : b_.Seq(std::move(lit), "literal");
      } else if (c == '[') {
        ++i_;
        const bool negate = i_ < t_.size() && t_[i_] == '^';
        if (negate) ++i_;
        CodePointSet set;
        while (true) {
          if (i_ >= t_.size()) return Error("unterminated character class");
          if (t_[i_] == ']') {
            ++i_;
            break;
          }
          DSINFER_ASSIGN_OR_RETURN(uint32_t lo, Char());
          uint32_t hi = lo;
          if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
            ++i_;
            DSINFER_ASSIGN_OR_RETURN(hi, Char());
            if (hi < lo) return Error("character range out of order");
          }
          set.Add(lo, hi);
        }
        if (negate) set = set.Complement();
        if (set.empty()) return Error("empty character class");
        atom = Utf8Element(b_, set);
      } else if (c == '.') {
        ++i_;
        atom = Utf8Element(b_, CodePointSet::All());
      } else if (c == '(') {
        ++i_;
        const int32_t group = b_.NewRule("group");
        DSINFER_RETURN_IF_ERROR(Alternatives(group, depth + 1));
        SkipSpace();
        if (i_ >= t_.size() || t_[i_] != ')') return Error("missing ')'");
        ++i_;
        atom = GrammarBuilder::Ref(group);
      } else if (IsNameChar(c)) {
        atom = GrammarBuilder::Ref(RuleId(Name()));
      } else {
        return Error(std::string("unexpected character '") + c + "'");
      }
      DSINFER_RETURN_IF_ERROR(Quantifiers(&atom));
      seq->push_back(atom);
    }
  }

  Status Quantifiers(Element* atom) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '*') {
        *atom = b_.Star(*atom);
      } else if (c == '+') {
        *atom = b_.Repeat(*atom, 1, -1);
      } else if (c == '?') {
        *atom = b_.Optional(*atom);
      } else if (c == '{') {
        ++i_;
        int64_t lo = 0, hi = -1;
        if (!Number(&lo)) return Error("expected a number after '{'");
        SkipSpace();
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          SkipSpace();
          if (!Number(&hi)) hi = -1;
        } else {
          hi = lo;
        }
        SkipSpace();
        if (i_ >= t_.size() || t_[i_] != '}') return Error("expected '}'");
        if (lo > max_repeat_ || hi > max_repeat_)
          return Error("repetition bound above " + std::to_string(max_repeat_));
        if (hi >= 0 && hi < lo) return Error("repetition {m,n} with n < m");
        *atom = b_.Repeat(*atom, lo, hi);
      } else {
        return Status::Ok();
      }
      ++i_;
    }
    return Status::Ok();
  }

  bool Number(int64_t* out) {
    SkipSpace();
    const size_t s = i_;
    int64_t v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && v <= max_repeat_)
      v = v * 10 + (t_[i_++] - '0');
    *out = v;
    return i_ > s;
  }

  StatusOr<uint32_t> Hex(int n) {
    if (i_ + n > t_.size()) return Error("short escape");
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = t_[i_++];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) return Error("bad hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
      return Error("escape is not a Unicode scalar value");
    return v;
  }

  // One character of a literal or class (UTF-8 or an escape).
  StatusOr<uint32_t> Char() {
    if (t_[i_] == '\\') {
      if (++i_ >= t_.size()) return Error("trailing backslash");
      const char e = t_[i_++];
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case 'x':
          return Hex(2);
        case 'u':
          return Hex(4);
        case 'U':
          return Hex(8);
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
          return static_cast<uint32_t>(e);
        default:
          return Error(std::string("unknown escape \\") + e);
      }
    }
    const auto c0 = static_cast<uint8_t>(t_[i_]);
    const int n = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : c0 >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + n > t_.size()) return Error("invalid UTF-8");
    uint32_t c = n == 1 ? c0 : c0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto ck = static_cast<uint8_t>(t_[i_ + k]);
      if ((ck & 0xC0) != 0x80) return Error("invalid UTF-8");
      c = c << 6 | (ck & 0x3F);
    }
    i_ += n;
    return c;
  }

  GrammarBuilder& b_;
  std::string_view t_;
  int64_t max_repeat_;
  size_t i_ = 0;
  std::map<std::string, int32_t> rules_;
  std::map<std::string, bool> defined_;
};

}  // namespace

StatusOr<Element> CompileGbnf(GrammarBuilder& b, std::string_view text, int64_t max_repeat) {
  GbnfParser p(b, text, max_repeat);
  return p.Parse();
}

}  // namespace dsinfer::structured
