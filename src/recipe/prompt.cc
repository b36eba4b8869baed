// Prompt segments and their tokenization.
#include "recipe/prompt.h"

#include "recipe/dialect.h"

namespace dsinfer::recipe {

void Prompt::AddText(std::string_view text) {
  if (text.empty()) return;
  if (!segments_.empty() && !segments_.back().special) {
    segments_.back().text.append(text);
  } else {
    segments_.push_back(Segment{false, std::string(text)});
  }
}

void Prompt::AddSpecial(std::string_view spelling) { segments_.push_back(Segment{true, std::string(spelling)}); }

void Prompt::AddTemplate(std::string_view text) {
  const std::string_view specials[] = {kDsml, kThinkEnd, kThinkStart};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    std::string_view which;
    for (std::string_view s : specials) {
      const size_t p = text.find(s, pos);
      if (p < best) {
        best = p;
        which = s;
      }
    }
    if (best == std::string_view::npos) {
      AddText(text.substr(pos));
      break;
    }
    AddText(text.substr(pos, best - pos));
    AddSpecial(which);
    pos = best + which.size();
  }
}

void Prompt::Append(const Prompt& other) {
  for (const Segment& s : other.segments_) {
    if (s.special) {
      AddSpecial(s.text);
    } else {
      AddText(s.text);
    }
  }
}

std::string Prompt::Text() const {
  std::string out;
  for (const Segment& s : segments_) out += s.text;
  return out;
}

StatusOr<std::vector<int32_t>> Prompt::ToIds(const tokenizer::Tokenizer& tokenizer) const {
  std::vector<int32_t> ids;
  for (const Segment& s : segments_) {
    if (s.special) {
      const auto id = tokenizer.TokenToId(s.text);
      if (!id) return NotFound("the tokenizer has no control token '" + s.text + "'");
      ids.push_back(*id);
    } else {
      tokenizer.EncodeTo(s.text, /*allow_special=*/false, &ids);
    }
  }
  return ids;
}

}  // namespace dsinfer::recipe
