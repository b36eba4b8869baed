#include "engine/text_codec.h"

#include <filesystem>

namespace dsinfer::engine {

namespace {

class IdsOnly final : public TextCodec {
 public:
  bool has_text() const override { return false; }
  StatusOr<std::vector<int32_t>> Encode(const std::string&) const override { return NoText("a text prompt"); }
  StatusOr<std::vector<int32_t>> RenderChat(const std::vector<ChatMessage>&) const override {
    return NoText("chat messages");
  }
  std::string Decode(const std::vector<int32_t>&) const override { return ""; }
  std::unique_ptr<IncrementalDecoder> NewDecoder() const override { return nullptr; }

 private:
  static Status NoText(const std::string& what) {
    return InvalidArgument(what + " needs a tokenizer, and this model has none (no tokenizer.json); "
                           "pass prompt token ids instead");
  }
};

}  // namespace

std::unique_ptr<TextCodec> NoTextCodec() { return std::make_unique<IdsOnly>(); }

StatusOr<std::unique_ptr<TextCodec>> LoadTextCodec(const std::string& model_dir,
                                                   const std::string& tokenizer_path) {
  if (!tokenizer_path.empty() && !std::filesystem::exists(tokenizer_path)) {
    return NotFound("tokenizer " + tokenizer_path + " does not exist");
  }
  return NoTextCodec();
}

}  // namespace dsinfer::engine
