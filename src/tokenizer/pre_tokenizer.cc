// PreTokenizer on PCRE2: each Split step finds non-overlapping matches left to right in a piece
// (like Oniguruma's find_iter) and turns matches and the gaps between them into pieces according
// to the step's behavior.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "tokenizer/unicode_delta.h"

namespace dsinfer::tokenizer {

namespace {

// The GPT-2 pattern that ByteLevel(use_regex=true) applies.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

std::string EscapeLiteral(std::string_view s) {
  std::string out = "\\Q";
  for (char c : s) {
    if (c == '\\') {
      out += "\\E\\\\\\Q";
    } else {
      out.push_back(c);
    }
  }
  return out + "\\E";
}

}  // namespace

struct PreTokenizer::Step {
  enum class Kind { kSplit, kPrefixSpace } kind = Kind::kSplit;
  pcre2_code* code = nullptr;
  Behavior behavior = Behavior::kIsolated;
};

PreTokenizer::PreTokenizer() = default;

PreTokenizer::~PreTokenizer() {
  for (auto& s : steps_) {
    if (s.code) pcre2_code_free(s.code);
  }
}

namespace {

// The ranges Unicode 16 adds to general category group `g` ('L', 'M', 'N', 'P', 'S'), written as
// class items "\x{a}-\x{b}..."; "" for other letters.
std::string ExtraClassItems(char g) {
  const UnicodeRange* begin = nullptr;
  size_t n = 0;
  switch (g) {
    case 'L': begin = kUnicode16ExtraL; n = std::size(kUnicode16ExtraL); break;
    case 'M': begin = kUnicode16ExtraM; n = std::size(kUnicode16ExtraM); break;
    case 'N': begin = kUnicode16ExtraN; n = std::size(kUnicode16ExtraN); break;
    case 'P': begin = kUnicode16ExtraP; n = std::size(kUnicode16ExtraP); break;
    case 'S': begin = kUnicode16ExtraS; n = std::size(kUnicode16ExtraS); break;
    default: return "";
  }
  std::string out;
  char buf[48];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", begin[i].first, begin[i].last);
    out += buf;
  }
  return out;
}

}  // namespace

std::string PreTokenizer::TranslateRegex(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  size_t class_start = 0;  // index in `pattern` just after '[' or '[^'
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's') {
        out += "\\p{White_Space}";
        ++i;
      } else if (e == 'S') {
        out += "\\P{White_Space}";
        ++i;
      } else if ((e == 'p' || e == 'P') && i + 4 < pattern.size() && pattern[i + 2] == '{' &&
                 pattern[i + 4] == '}' && !ExtraClassItems(pattern[i + 3]).empty() &&
                 !(in_class && e == 'P')) {
        // \p{X} -> \p{X} plus the code points Unicode 16 added to X.
        std::string items = "\\p{";
        items.push_back(pattern[i + 3]);
        items.push_back('}');
        items.append(ExtraClassItems(pattern[i + 3]));
        if (in_class) {
          out.append(items);
        } else {
          out.append(e == 'p' ? "[" : "[^");
          out.append(items);
          out.push_back(']');
        }
        i += 4;
      } else {
        out.push_back(c);
        out.push_back(e);
        ++i;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = i + 1;
      if (class_start < pattern.size() && pattern[class_start] == '^') ++class_start;
    } else if (in_class && c == ']' && i != class_start) {
      in_class = false;
    }
    out.push_back(c);
  }
  return out;
}

namespace {

StatusOr<pcre2_code*> Compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return InvalidArgument("tokenizer.json: cannot compile pre-tokenizer regex at offset " +
                           std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
  return code;
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(const nlohmann::json& config) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  std::vector<const nlohmann::json*> items;
  if (config.is_object() && config.value("type", "") == "Sequence" &&
      config.contains("pretokenizers") && config["pretokenizers"].is_array()) {
    for (const auto& p : config["pretokenizers"]) items.push_back(&p);
  } else if (config.is_object()) {
    items.push_back(&config);
  } else {
    return Unimplemented("tokenizer.json: a pre_tokenizer is required (byte-level BPE only)");
  }
  bool has_byte_level = false;
  for (const nlohmann::json* p : items) {
    if (!p->is_object()) return InvalidArgument("tokenizer.json: pre_tokenizer entry is not an object");
    const std::string type = p->value("type", "");
    if (type == "Split") {
      if (p->value("invert", false)) return Unimplemented("tokenizer.json: Split with invert=true");
      const auto& pat = p->contains("pattern") ? (*p)["pattern"] : nlohmann::json();
      std::string regex;
      if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) {
        regex = TranslateRegex(pat["Regex"].get<std::string>());
      } else if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
        regex = EscapeLiteral(pat["String"].get<std::string>());
      } else {
        return InvalidArgument("tokenizer.json: Split without a Regex or String pattern");
      }
      const std::string behavior = p->value("behavior", "");
      Step step;
      if (behavior == "Isolated") {
        step.behavior = Behavior::kIsolated;
      } else if (behavior == "Removed") {
        step.behavior = Behavior::kRemoved;
      } else if (behavior == "MergedWithPrevious") {
        step.behavior = Behavior::kMergedWithPrevious;
      } else if (behavior == "MergedWithNext") {
        step.behavior = Behavior::kMergedWithNext;
      } else {
        return Unimplemented("tokenizer.json: Split behavior '" + behavior + "'");
      }
      DSINFER_ASSIGN_OR_RETURN(step.code, Compile(regex));
      pt->steps_.push_back(step);
    } else if (type == "ByteLevel") {
      has_byte_level = true;
      if (p->value("add_prefix_space", false)) {
        Step step;
        step.kind = Step::Kind::kPrefixSpace;
        pt->steps_.push_back(step);
      }
      if (p->value("use_regex", true)) {
        Step step;
        DSINFER_ASSIGN_OR_RETURN(step.code, Compile(TranslateRegex(kGpt2Pattern)));
        pt->steps_.push_back(step);
      }
    } else {
      return Unimplemented("tokenizer.json: pre-tokenizer type '" + type + "'");
    }
  }
  if (!has_byte_level) {
    return Unimplemented("tokenizer.json: only byte-level BPE (a ByteLevel pre-tokenizer) is supported");
  }
  return pt;
}

void PreTokenizer::Split(std::string_view text,
                         const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  std::vector<pcre2_match_data*> md(steps_.size(), nullptr);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].code) md[i] = pcre2_match_data_create_from_pattern(steps_[i].code, nullptr);
  }
  RunStep(0, text, &md, emit);
  for (auto* m : md) {
    if (m) pcre2_match_data_free(m);
  }
}

void PreTokenizer::RunStep(size_t index, std::string_view piece, void* match_data_list,
                           const std::function<void(std::string_view)>& emit) const {
  if (piece.empty()) return;
  if (index == steps_.size()) {
    emit(piece);
    return;
  }
  const Step& step = steps_[index];
  if (step.kind == Step::Kind::kPrefixSpace) {
    if (piece[0] == ' ') {
      RunStep(index + 1, piece, match_data_list, emit);
    } else {
      // Prepending changes the bytes, so the rest of this piece works on a copy.
      std::string spaced(piece.size() + 1, ' ');
      piece.copy(spaced.data() + 1, piece.size());
      RunStep(index + 1, spaced, match_data_list, emit);
    }
    return;
  }
  auto* md = (*static_cast<std::vector<pcre2_match_data*>*>(match_data_list))[index];
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0;     // search start
  size_t last = 0;    // end of the text already handed on
  size_t pending = std::string_view::npos;  // kMergedWithNext: start of a match waiting for its gap
  auto next = [&](size_t b, size_t e) {
    if (e > b) RunStep(index + 1, piece.substr(b, e - b), match_data_list, emit);
  };
  while (pos < piece.size()) {
    const int rc = pcre2_jit_match(step.code, subject, piece.size(), pos, 0, md, nullptr);
    int rc2 = rc;
    if (rc == PCRE2_ERROR_JIT_BADOPTION) {
      rc2 = pcre2_match(step.code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    }
    if (rc2 < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t ms = ov[0], me = ov[1];
    if (me == ms) {  // empty match: step over one character, as find_iter does
      size_t adv = 1;
      while (ms + adv < piece.size() && (static_cast<unsigned char>(piece[ms + adv]) & 0xC0) == 0x80) ++adv;
      pos = ms + adv;
      continue;
    }
    switch (step.behavior) {
      case Behavior::kIsolated:
        next(last, ms);
        next(ms, me);
        break;
      case Behavior::kRemoved:
        next(last, ms);
        break;
      case Behavior::kMergedWithPrevious:
        next(last, me);
        break;
      case Behavior::kMergedWithNext:
        if (pending != std::string_view::npos) {
          next(pending, ms);
        } else {
          next(last, ms);
        }
        pending = ms;
        break;
    }
    last = me;
    pos = me;
  }
  if (step.behavior == Behavior::kMergedWithNext && pending != std::string_view::npos) {
    next(pending, piece.size());
  } else {
    next(last, piece.size());
  }
}

}  // namespace dsinfer::tokenizer
