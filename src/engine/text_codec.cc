#include "engine/text_codec.h"

#include <filesystem>

#include "recipe/chat_encoder.h"
#include "recipe/streaming_parser.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::engine {

namespace {

class IdsOnly final : public TextCodec {
 public:
  bool has_text() const override { return false; }
  StatusOr<std::vector<int32_t>> Encode(const std::string&) const override { return NoText("a text prompt"); }
  StatusOr<std::vector<int32_t>> RenderChat(const std::vector<ChatMessage>&, const ChatOptions&) const override {
    return NoText("chat messages");
  }
  std::string Decode(const std::vector<int32_t>&) const override { return ""; }
  std::unique_ptr<IncrementalDecoder> NewDecoder() const override { return nullptr; }
  StatusOr<ChatReply> ParseChat(const std::vector<int32_t>&, const ChatOptions&) const override {
    return NoText("parsing a chat reply");
  }

 private:
  static Status NoText(const std::string& what) {
    return InvalidArgument(what + " needs a tokenizer, and this model has none (no tokenizer.json); "
                           "pass prompt token ids instead");
  }
};

class Detokenizer final : public IncrementalDecoder {
 public:
  explicit Detokenizer(const tokenizer::Tokenizer* t) : detok_(t, /*skip_special=*/true) {}
  std::string Add(int32_t id) override { return detok_.Add(id); }
  std::string Finish() override { return detok_.Finish(); }

 private:
  tokenizer::IncrementalDetokenizer detok_;
};

// The tokenizer (tokenizer/) and the V4 chat recipe (recipe/).
class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(std::unique_ptr<tokenizer::Tokenizer> t, recipe::Dialect dialect)
      : tokenizer_(std::move(t)), dialect_(dialect) {}
  bool has_text() const override { return true; }
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    return tokenizer_->Encode(text, /*allow_special=*/true);
  }
  StatusOr<std::vector<int32_t>> RenderChat(const std::vector<ChatMessage>& messages,
                                            const ChatOptions& chat) const override {
    recipe::Json array = recipe::Json::array();
    for (const auto& m : messages) {
      if (m.json.empty()) {
        array.push_back({{"role", m.role}, {"content", m.content}});
        continue;
      }
      recipe::Json parsed = recipe::Json::parse(m.json, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return InvalidArgument("chat message is not a JSON object");
      }
      array.push_back(std::move(parsed));
    }
    recipe::EncodeOptions options;
    if (!chat.tools_json.empty()) {
      options.tools = recipe::Json::parse(chat.tools_json, nullptr, /*allow_exceptions=*/false);
      if (options.tools.is_discarded() || !options.tools.is_array()) {
        return InvalidArgument("tools must be a JSON array");
      }
    }
    options.dialect = dialect_;
    options.thinking = chat.thinking ? recipe::ThinkingMode::kThinking : recipe::ThinkingMode::kChat;
    options.reasoning_effort = chat.reasoning_effort;
    DSINFER_ASSIGN_OR_RETURN(const recipe::Prompt prompt, recipe::EncodeMessages(array, options));
    return prompt.ToIds(*tokenizer_);
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    return tokenizer_->Decode(ids, /*skip_special=*/true);
  }
  std::unique_ptr<IncrementalDecoder> NewDecoder() const override {
    return std::make_unique<Detokenizer>(tokenizer_.get());
  }
  const tokenizer::Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  recipe::Dialect dialect() const override { return dialect_; }
  StatusOr<ChatReply> ParseChat(const std::vector<int32_t>& ids,
                                const ChatOptions& chat) const override {
    const recipe::ParseDelta parsed = recipe::ParseCompletion(
        tokenizer_->Decode(ids, /*skip_special=*/false), dialect_, chat.thinking);
    ChatReply reply;
    reply.reasoning_content = parsed.reasoning;
    reply.content = parsed.content;
    for (const auto& call : parsed.tool_calls) reply.tool_calls.push_back({call.name, call.arguments});
    return reply;
  }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  recipe::Dialect dialect_;
};

}  // namespace

std::unique_ptr<TextCodec> NoTextCodec() { return std::make_unique<IdsOnly>(); }

StatusOr<std::unique_ptr<TextCodec>> LoadTextCodec(const std::string& model_dir,
                                                   const std::string& tokenizer_path) {
  std::string path = tokenizer_path;
  if (path.empty()) {
    path = model_dir + "/tokenizer.json";
    if (!std::filesystem::exists(path)) return NoTextCodec();
  }
  DSINFER_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::Load(path));
  const bool has_system = tok->TokenToId(std::string(recipe::kSystem)).has_value();
  const recipe::Dialect dialect = recipe::DetectDialect(model_dir, has_system);
  return std::unique_ptr<TextCodec>(std::make_unique<TokenizerCodec>(std::move(tok), dialect));
}

}  // namespace dsinfer::engine
