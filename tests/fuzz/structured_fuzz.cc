// libFuzzer target for the structured-output compilers: the first byte picks a mode, the rest is
// the constraint text, and its last 16 bytes also serve as an input to match.
//   mode 0: a JSON schema; mode 1: a regex; mode 2: a GBNF grammar; mode 3: a request body for
//   ParseOutputConstraint, compiled when it sets a constraint; a body that sets none but has
//   "tools" is a forced tool call (tool_choice "required") or strict tools under auto.
// Every input must compile or return a Status (never crash, hang or exhaust memory: the limits are
// small here), and a compiled constraint must survive masks and matching on a tiny vocabulary.
// Built with clang (-fsanitize=fuzzer) by scripts/fuzz_structured.sh, which CI runs for a bounded
// time.
#include <cstdint>
#include <string>
#include <vector>

#include "structured/constraint_compiler.h"
#include "structured/matcher.h"
#include "structured/tool_call_grammar.h"

namespace {

using namespace dsinfer::structured;

std::shared_ptr<const Vocabulary> FuzzVocabulary() {
  static const auto v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"{\"", "\":", "\",", "\"}", "true", "null", "12", "ab", "é"})
      bytes.push_back(p);
    bytes.push_back("");  // ｜DSML｜
    bytes.push_back("");  // EOS
    const auto n = static_cast<int32_t>(bytes.size());
    return Vocabulary::Create(bytes, n, n - 1, {n - 2});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ConstraintSpec spec;
  switch (data[0] % 4) {
    case 0:
      spec.kind = ConstraintKind::kJsonSchema;
      spec.text = text;
      break;
    case 1:
      spec.kind = ConstraintKind::kRegex;
      spec.text = text;
      break;
    case 2:
      spec.kind = ConstraintKind::kGrammar;
      spec.text = text;
      break;
    default: {
      const auto body = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) return 0;
      auto parsed = ParseOutputConstraint(body);
      if (parsed.ok() && !parsed->active() && body.is_object() && body.contains("tools")) {
        const bool required = body.contains("tool_choice") && body["tool_choice"] == "required";
        parsed = required ? ToolCallSpec(body["tools"], "", true)
                          : StrictToolCallSpec(body["tools"], true);
      }
      if (!parsed.ok() || !parsed->active()) return 0;
      spec = *parsed;
    }
  }
  CompileOptions options;
  options.max_elements = 1 << 16;
  options.pda.max_configs = 2048;
  options.pda.max_nodes = 1 << 16;
  auto automaton = CompileConstraint(spec, FuzzVocabulary(), options);
  if (!automaton.ok()) return 0;
  Matcher m(*automaton);
  const std::string tail = text.substr(text.size() > 16 ? text.size() - 16 : 0);
  for (int step = 0; step < 8 && !m.IsCompleted(); ++step) {
    const auto mask = m.Mask();
    int32_t pick = -1;
    const uint8_t want = tail.empty() ? 0 : static_cast<uint8_t>(tail[step % tail.size()]);
    for (int64_t id = 0; id < FuzzVocabulary()->size(); ++id) {
      if (MaskHas(mask->data(), id)) {
        pick = static_cast<int32_t>(id);
        if (id >= want) break;
      }
    }
    if (pick < 0) break;
    if (!m.Advance(pick).ok()) break;
  }
  if (m.num_tokens() > 0) m.Rollback(1);
  return 0;
}
