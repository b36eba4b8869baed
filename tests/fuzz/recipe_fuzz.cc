// libFuzzer target for the recipe: the first byte picks a mode.
//   mode 0: the input is a completion; StreamingParser must not crash, and pushing it in chunks
//           (cut points from the input's own bytes) must give the same result as in one piece;
//   mode 1: the input is a messages JSON document; EncodeMessages must return a prompt or a
//           Status, never crash.
// Built with clang (-fsanitize=fuzzer) by scripts/fuzz_recipe.sh, which CI runs for a bounded time.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "recipe/chat_encoder.h"
#include "recipe/streaming_parser.h"

namespace {

using dsinfer::recipe::Dialect;
using dsinfer::recipe::ParseDelta;
using dsinfer::recipe::StreamingParser;

void CheckParser(std::string_view text, uint8_t flags) {
  const Dialect d = (flags & 2) ? Dialect::kV41 : Dialect::kV4;
  const bool thinking = flags & 1;
  const ParseDelta whole = dsinfer::recipe::ParseCompletion(text, d, thinking);
  StreamingParser p(d, thinking);
  ParseDelta streamed;
  size_t pos = 0, step = 1 + (flags >> 2);
  while (pos < text.size()) {
    const size_t n = std::min(step, text.size() - pos);
    streamed.Append(p.Push(text.substr(pos, n)));
    pos += n;
    step = 1 + static_cast<uint8_t>(text[pos - 1]) % 7;
  }
  streamed.Append(p.Finish());
  if (streamed.reasoning != whole.reasoning || streamed.content != whole.content ||
      !(streamed.tool_calls == whole.tool_calls) || streamed.done != whole.done) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (data[0] % 2 == 0) {
    CheckParser(text, data[1]);
  } else {
    auto j = dsinfer::recipe::Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    dsinfer::recipe::EncodeOptions o;
    o.thinking = (data[1] & 1) ? dsinfer::recipe::ThinkingMode::kThinking : dsinfer::recipe::ThinkingMode::kChat;
    o.dialect = (data[1] & 2) ? Dialect::kV41 : Dialect::kV4;
    o.drop_thinking = data[1] & 4;
    auto p = dsinfer::recipe::EncodeMessages(j, o);
    if (p.ok()) (void)p->Text();
  }
  return 0;
}
