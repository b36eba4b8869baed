#include "api/generate_request.h"

#include "engine/public_types.h"

namespace dsinfer::api {

GenerateRequest ToGenerateRequest(const request::Request& r) {
  GenerateRequest g;
  g.prompt = r.prompt;
  g.prompt_ids = r.prompt_ids;
  if (r.messages.is_array()) {
    for (const auto& m : r.messages) {
      // The whole message goes to the recipe (content parts, tool_calls, reasoning_content).
      g.messages.push_back({m.value("role", ""), "", m.dump()});
    }
  }
  g.chat.thinking = r.thinking;
  g.chat.reasoning_effort = r.reasoning_effort;
  if (r.tool_choice != request::ToolChoice::kNone) g.chat.tools_json = r.tools_json;
  g.params = engine::ToPublicParams(r.sampling);
  g.priority = r.priority;
  // vLLM: a chat request without max_tokens may use the rest of the context.
  g.max_tokens_up_to_context = r.kind == request::Kind::kChat && !r.max_tokens_given;
  return g;
}

}  // namespace dsinfer::api
