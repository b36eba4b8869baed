// Prompt: a rendered chat prompt as segments {control token | plain text} (recipe-v4.md §0.4,
// §3.9). Control tokens are only those the encoder itself writes; plain text (message contents,
// tool schemas, arguments) is tokenized without added-token matching, so a user who types
// "<｜User｜>" gets ordinary characters, never the control id (prompt-injection safe).
// Value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::recipe {

struct Segment {
  bool special = false;  // a control token, given by its spelling
  std::string text;
};

class Prompt {
 public:
  void AddText(std::string_view text);        // merges with a preceding text segment
  void AddSpecial(std::string_view spelling);
  // Fixed template text of the encoder: its control-token spellings (｜DSML｜, <think>,
  // </think>) become control tokens, the rest plain text. Never for user-supplied text.
  void AddTemplate(std::string_view text);
  void Append(const Prompt& other);

  const std::vector<Segment>& segments() const { return segments_; }
  // The prompt as one string (what the reference encoder returns).
  std::string Text() const;
  // Ids: control tokens by their id (an error if the tokenizer lacks one), text by plain BPE.
  StatusOr<std::vector<int32_t>> ToIds(const tokenizer::Tokenizer& tokenizer) const;

 private:
  std::vector<Segment> segments_;
};

}  // namespace dsinfer::recipe
