// EncodeMessages: render_message() and encode_messages() of the reference encoders.
#include "recipe/chat_encoder.h"

#include "recipe/python_json.h"

namespace dsinfer::recipe {

namespace {

constexpr std::string_view kToolsTemplateHead =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<{D}{C}>\" block like the following:\n\n"
    "<{D}{C}>\n"
    "<{D}{I} name=\"$TOOL_NAME\">\n"
    "<{D}{P} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}{P}>\n"
    "...\n"
    "</{D}{I}>\n"
    "<{D}{I} name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</{D}{I}>\n"
    "</{D}{C}>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTemplateTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";
constexpr std::string_view kResponseFormat =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
  return s;
}

void RenderTools(const Json& tools, Dialect dialect, Prompt* p) {
  const DsmlNames names = DsmlNamesOf(dialect);
  std::string head(kToolsTemplateHead);
  head = ReplaceAll(head, "{D}", kDsml);
  head = ReplaceAll(head, "{C}", names.calls);
  head = ReplaceAll(head, "{I}", names.invoke);
  head = ReplaceAll(head, "{P}", names.parameter);
  p->AddTemplate(head);
  bool first = true;
  for (const auto& t : tools) {
    if (!first) p->AddText("\n");
    first = false;
    p->AddText(PythonJsonDumps(t["function"]));
  }
  p->AddTemplate(kToolsTemplateTail);
}

// `<{D}{tag}` and `</{D}{tag}>` pieces.
void Open(Prompt* p, std::string_view tag) {
  p->AddText("<");
  p->AddSpecial(kDsml);
  p->AddText(tag);
}
void Close(Prompt* p, std::string_view tag) {
  p->AddText("</");
  p->AddSpecial(kDsml);
  p->AddText(tag);
  p->AddText(">");
}

// encode_arguments_to_dsml: parameters from the arguments JSON (falling back to
// {"arguments": raw} when it is not a JSON object).
void RenderArguments(const std::string& raw, Dialect dialect, Prompt* p) {
  const DsmlNames names = DsmlNamesOf(dialect);
  Json args = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (dialect == Dialect::kV41 && args.is_string()) {  // V4.1 tolerates double-encoded JSON
    Json again = Json::parse(args.get<std::string>(), nullptr, false);
    if (!again.is_discarded()) args = again;
  }
  if (args.is_discarded() || !args.is_object()) {
    // The V4 reference would crash on a non-object JSON value; both treat it as raw text.
    args = Json::object();
    args["arguments"] = raw;
  }
  bool first = true;
  for (const auto& [k, v] : args.items()) {
    if (!first) p->AddText("\n");
    first = false;
    Open(p, names.parameter);
    p->AddText(" name=\"" + k + "\" string=\"" + (v.is_string() ? "true" : "false") + "\">");
    p->AddText(v.is_string() ? v.get<std::string>() : PythonJsonDumps(v));
    Close(p, names.parameter);
  }
}

struct RenderContext {
  const Messages& messages;
  const EncodeOptions& options;
  bool drop_thinking;
  int last_user;
};

Status RenderMessage(size_t index, const RenderContext& ctx, Prompt* p) {
  const Messages& messages = ctx.messages;
  const Json& msg = messages[index];
  const Dialect dialect = ctx.options.dialect;
  const bool v41 = dialect == Dialect::kV41;
  const bool thinking = ctx.options.thinking == ThinkingMode::kThinking;
  const bool is_last = index + 1 == messages.size();
  const std::string role = msg.value("role", "");
  const Json content = msg.value("content", Json());
  const std::string content_str = content.is_string() ? content.get<std::string>() : "";
  const Json tools = msg.value("tools", Json());
  const Json response_format = msg.value("response_format", Json());

  if (v41) {
    std::string effort;
    if (index == 0 && thinking) {
      DSINFER_ASSIGN_OR_RETURN(effort, ReasoningEffortPrefix(dialect, ctx.options.reasoning_effort));
    }
    if (index == 0 && (!effort.empty() || role == "system")) p->AddSpecial(kSystem);
    p->AddText(effort);
  } else if (index == 0 && thinking) {
    DSINFER_ASSIGN_OR_RETURN(const std::string effort,
                             ReasoningEffortPrefix(dialect, ctx.options.reasoning_effort));
    p->AddText(effort);
  }

  auto tools_and_format = [&] {
    if (Truthy(tools)) {
      p->AddText("\n\n");
      RenderTools(tools, dialect, p);
    }
    if (Truthy(response_format)) {
      p->AddText(kResponseFormat);
      p->AddText(PythonJsonDumps(response_format));
    }
  };

  if (role == "system") {
    if (v41 && index > 0) p->AddSpecial(kSystem);
    p->AddText(content_str);
    tools_and_format();
  } else if (role == "developer") {
    p->AddSpecial(kUser);
    p->AddText(content_str);
    tools_and_format();
  } else if (role == "user") {
    p->AddSpecial(kUser);
    const Json blocks = msg.value("content_blocks", Json());
    if (Truthy(blocks)) {
      bool first = true;
      for (const auto& b : blocks) {
        if (!first) p->AddText("\n\n");
        first = false;
        const std::string type = b.value("type", "");
        if (type == "text") {
          const Json t = b.value("text", Json(""));
          p->AddText(t.is_string() ? t.get<std::string>() : "");
        } else if (type == "tool_result") {
          const Json c = b.value("content", Json(""));
          std::string text;
          if (c.is_array()) {
            bool first_part = true;
            for (const auto& part : c) {
              if (!first_part) text += "\n\n";
              first_part = false;
              const std::string pt = part.is_object() ? part.value("type", "") : "";
              if (pt == "text" && part.contains("text") && part["text"].is_string()) {
                text += part["text"].get<std::string>();
              } else {
                text += "[Unsupported " + (pt.empty() ? std::string("None") : pt) + "]";
              }
            }
          } else if (c.is_string()) {
            text = c.get<std::string>();
          }
          p->AddText("<tool_result>" + text + "</tool_result>");
        } else {
          p->AddText("[Unsupported " + type + "]");
        }
      }
    } else {
      p->AddText(content_str);
    }
  } else if (role == "latest_reminder") {
    p->AddSpecial(kLatestReminder);
    p->AddText(content_str);
  } else if (role == "assistant") {
    const bool prev_has_task = index > 0 && messages[index - 1].contains("task") &&
                               !messages[index - 1]["task"].is_null();
    if (thinking && !prev_has_task &&
        (!ctx.drop_thinking || static_cast<int>(index) > ctx.last_user)) {
      const Json rc = msg.value("reasoning_content", Json());
      p->AddText(rc.is_string() ? rc.get<std::string>() : "");
      p->AddSpecial(kThinkEnd);
    }
    p->AddText(content_str);
    const Json tool_calls = msg.value("tool_calls", Json());
    if (Truthy(tool_calls)) p->Append(RenderToolCalls(tool_calls, dialect));
    if (!Truthy(msg.value("wo_eos", Json(false)))) p->AddSpecial(kEos);
  } else {
    return InvalidArgument("messages[" + std::to_string(index) + "]: unknown role '" + role + "'");
  }

  // Transition to the next turn.
  if (v41 && is_last && !ctx.options.add_generation_prompt) return Status::Ok();
  if (!is_last) {
    const std::string next_role = messages[index + 1].value("role", "");
    if (next_role != "assistant" && next_role != "latest_reminder") return Status::Ok();
  }
  const Json task = msg.value("task", Json());
  if (!task.is_null()) {
    const std::string t = task.get<std::string>();
    const std::string token = "<\xEF\xBD\x9C" + t + "\xEF\xBD\x9C>";
    if (t != "action") {
      p->AddSpecial(token);
    } else {
      p->AddSpecial(kAssistant);
      p->AddSpecial(thinking ? kThinkStart : kThinkEnd);
      p->AddSpecial(token);
    }
  } else if (role == "user" || role == "developer" || (v41 && role == "system" && index > 0)) {
    // As in the reference, a last assistant turn (or a lone first system message) gets no
    // generation prompt: a wo_eos assistant turn is a prefill the model continues.
    p->AddSpecial(kAssistant);
    const bool think = thinking && (!ctx.drop_thinking || static_cast<int>(index) >= ctx.last_user);
    p->AddSpecial(think ? kThinkStart : kThinkEnd);
  }
  return Status::Ok();
}

}  // namespace

Prompt RenderToolCalls(const Json& tool_calls, Dialect dialect) {
  const DsmlNames names = DsmlNamesOf(dialect);
  Prompt p;
  p.AddText("\n\n");
  Open(&p, names.calls);
  p.AddText(">\n");
  bool first = true;
  for (const auto& tc : tool_calls) {
    if (!first) p.AddText("\n");
    first = false;
    const Json& fn = tc["function"];
    Open(&p, names.invoke);
    p.AddText(" name=\"" + fn.value("name", "") + "\">\n");
    const Json args = fn.value("arguments", Json("{}"));
    RenderArguments(args.is_string() ? args.get<std::string>() : PythonJsonDumps(args), dialect, &p);
    p.AddText("\n");
    Close(&p, names.invoke);
  }
  p.AddText("\n");
  Close(&p, names.calls);
  return p;
}

StatusOr<Prompt> EncodeMessages(const Json& messages_json, const EncodeOptions& options) {
  DSINFER_ASSIGN_OR_RETURN(Messages messages, NormalizeMessages(messages_json, options.tools));
  Messages context;
  if (!options.context.is_null()) {
    DSINFER_ASSIGN_OR_RETURN(context, NormalizeMessages(options.context, Json()));
  }
  const Dialect dialect = options.dialect;
  if (options.thinking == ThinkingMode::kChat && dialect != Dialect::kV41) {
    // Validate the effort even when chat mode ignores it.
    DSINFER_RETURN_IF_ERROR(ReasoningEffortPrefix(dialect, options.reasoning_effort).status());
  }
  messages = MergeToolMessages(messages, dialect);
  {
    Messages all = context;  // the reference sorts the raw context + the merged messages
    all.insert(all.end(), messages.begin(), messages.end());
    SortToolResults(all);
    messages.assign(all.begin() + static_cast<std::ptrdiff_t>(context.size()), all.end());
  }
  if (!context.empty()) {
    context = MergeToolMessages(context, dialect);
    SortToolResults(context);
  }
  Messages full = context;
  full.insert(full.end(), messages.begin(), messages.end());

  Prompt prompt;
  if (options.add_bos && context.empty()) prompt.AddSpecial(kBos);
  bool drop = options.drop_thinking;
  for (const Json& m : full) {
    if (m.contains("tools") && Truthy(m["tools"])) drop = false;
  }
  const bool thinking = options.thinking == ThinkingMode::kThinking;
  size_t num_to_render = messages.size();
  size_t context_len = context.size();
  if (thinking && drop) {
    full = DropThinking(full, dialect);
    num_to_render = full.size() - DropThinking(context, dialect).size();
    context_len = full.size() - num_to_render;
  }
  const RenderContext ctx{full, options, drop, FindLastUserIndex(full, dialect)};
  for (size_t i = 0; i < num_to_render; ++i) {
    DSINFER_RETURN_IF_ERROR(RenderMessage(i + context_len, ctx, &prompt));
  }
  return prompt;
}

}  // namespace dsinfer::recipe
