// A fake text codec for engine tests: one letter per id, so that stop strings can span tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/text_codec.h"

namespace dsinfer::testing {

// Id i decodes to the letter 'a' + i % 26 (ids >= 260 to two letters), so stop strings can span
// tokens.
class LetterCodec final : public engine::TextCodec {
 public:
  bool has_text() const override { return true; }
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (char ch : text) ids.push_back(static_cast<int32_t>(ch - 'a'));
    return ids;
  }
  StatusOr<std::vector<int32_t>> RenderChat(const std::vector<ChatMessage>& m,
                                            const ChatOptions&) const override {
    std::string all;
    for (const auto& x : m) all += x.content;
    return Encode(all);
  }
  static std::string Piece(int32_t id) {
    std::string s(1, static_cast<char>('a' + id % 26));
    if (id >= 260) s += 'z';
    return s;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s += Piece(id);
    return s;
  }
  // The whole text is the answer (no reasoning or tool-call syntax in this alphabet).
  StatusOr<ChatReply> ParseChat(const std::vector<int32_t>& ids,
                                const ChatOptions&) const override {
    ChatReply reply;
    reply.content = Decode(ids);
    return reply;
  }
  std::unique_ptr<engine::IncrementalDecoder> NewDecoder() const override {
    struct D final : engine::IncrementalDecoder {
      std::string Add(int32_t id) override { return Piece(id); }
      std::string Finish() override { return ""; }
    };
    return std::make_unique<D>();
  }
};

}  // namespace dsinfer::testing
