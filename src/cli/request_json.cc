#include "cli/request_json.h"

#include <limits>

#include "base/status.h"
#include "engine/public_types.h"
#include "structured/constraint_spec.h"

namespace dsinfer::cli {

namespace {

using json = nlohmann::json;

Status Bad(const std::string& key, const std::string& what) {
  return InvalidArgument("\"" + key + "\" " + what);
}

Status GetFloat(const json& v, const std::string& key, float* out) {
  if (!v.is_number()) return Bad(key, "must be a number");
  *out = v.get<float>();
  return Status::Ok();
}

Status GetInt(const json& v, const std::string& key, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return Bad(key, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) return Bad(key, "is too large");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return Bad(key, "is out of range");
  *out = x;
  return Status::Ok();
}

Status GetInt32(const json& v, const std::string& key, int* out) {
  int64_t x = 0;
  DSINFER_RETURN_IF_ERROR(GetInt(v, key, INT32_MIN, INT32_MAX, &x));
  *out = static_cast<int>(x);
  return Status::Ok();
}

Status GetBool(const json& v, const std::string& key, bool* out) {
  if (!v.is_boolean()) return Bad(key, "must be true or false");
  *out = v.get<bool>();
  return Status::Ok();
}

Status GetIds(const json& v, const std::string& key, std::vector<int32_t>* out) {
  if (!v.is_array()) return Bad(key, "must be an array of token ids");
  out->clear();
  for (const auto& x : v) {
    int64_t id = 0;
    DSINFER_RETURN_IF_ERROR(GetInt(x, key, 0, INT32_MAX, &id));
    out->push_back(static_cast<int32_t>(id));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GenerateRequest> ParseRequestJson(const json& line, const GenerateRequest& defaults) {
  if (!line.is_object()) return InvalidArgument("a request line must be a JSON object");
  GenerateRequest r;
  r.params = defaults.params;
  r.priority = defaults.priority;
  r.chat = defaults.chat;
  auto& p = r.params;
  for (const auto& [key, v] : line.items()) {
    if (key == "id") continue;
    if (key == "prompt") {
      if (!v.is_string()) return Bad(key, "must be a string");
      r.prompt = v.get<std::string>();
      if (r.prompt.empty()) return Bad(key, "is empty");
    } else if (key == "prompt_ids") {
      DSINFER_RETURN_IF_ERROR(GetIds(v, key, &r.prompt_ids));
      if (r.prompt_ids.empty()) return Bad(key, "is empty");
    } else if (key == "messages") {
      if (!v.is_array() || v.empty()) return Bad(key, "must be a non-empty array");
      for (const auto& m : v) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
          return Bad(key, "entries must be objects with a string \"role\"");
        }
        // The whole message goes to the recipe (content parts, tool_calls, reasoning_content,
        // tool results); it validates roles and fields.
        r.messages.push_back({m["role"].get<std::string>(), "", m.dump()});
      }
    } else if (key == "tools") {
      if (!v.is_array()) return Bad(key, "must be an array of tool definitions");
      r.chat.tools_json = v.dump();
    } else if (key == "thinking") {
      DSINFER_RETURN_IF_ERROR(GetBool(v, key, &r.chat.thinking));
    } else if (key == "reasoning_effort") {
      if (!v.is_string()) return Bad(key, "must be a string");
      r.chat.reasoning_effort = v.get<std::string>();
    } else if (key == "max_tokens") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &p.max_tokens));
    } else if (key == "min_tokens") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &p.min_tokens));
    } else if (key == "n") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &p.n));
    } else if (key == "top_k") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &p.top_k));
    } else if (key == "top_logprobs") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &p.top_logprobs));
    } else if (key == "priority") {
      DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &r.priority));
    } else if (key == "temperature") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.temperature));
    } else if (key == "top_p") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.top_p));
    } else if (key == "min_p") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.min_p));
    } else if (key == "repetition_penalty") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.repetition_penalty));
    } else if (key == "presence_penalty") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.presence_penalty));
    } else if (key == "frequency_penalty") {
      DSINFER_RETURN_IF_ERROR(GetFloat(v, key, &p.frequency_penalty));
    } else if (key == "ignore_eos") {
      DSINFER_RETURN_IF_ERROR(GetBool(v, key, &p.ignore_eos));
    } else if (key == "include_stop_str_in_output") {
      DSINFER_RETURN_IF_ERROR(GetBool(v, key, &p.include_stop_str_in_output));
    } else if (key == "logprobs") {
      DSINFER_RETURN_IF_ERROR(GetBool(v, key, &p.logprobs));
    } else if (key == "seed") {
      if (v.is_null()) {
        p.seed.reset();
        continue;
      }
      int64_t seed = 0;
      DSINFER_RETURN_IF_ERROR(GetInt(v, key, 0, std::numeric_limits<int64_t>::max(), &seed));
      p.seed = static_cast<uint64_t>(seed);
    } else if (key == "stop") {
      p.stop.clear();
      if (v.is_string()) {
        p.stop.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const auto& s : v) {
          if (!s.is_string()) return Bad(key, "must be a string or an array of strings");
          p.stop.push_back(s.get<std::string>());
        }
      } else if (!v.is_null()) {
        return Bad(key, "must be a string or an array of strings");
      }
    } else if (key == "stop_token_ids") {
      DSINFER_RETURN_IF_ERROR(GetIds(v, key, &p.stop_token_ids));
    } else if (key == "logit_bias") {
      if (!v.is_object()) return Bad(key, "must be an object {\"token id\": bias}");
      p.logit_bias.clear();
      for (const auto& [id, bias] : v.items()) {
        size_t used = 0;
        int64_t tok = -1;
        try {
          tok = std::stoll(id, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != id.size() || tok < 0 || tok > INT32_MAX) return Bad(key, "keys must be token ids");
        float b = 0;
        DSINFER_RETURN_IF_ERROR(GetFloat(bias, key, &b));
        p.logit_bias[static_cast<int32_t>(tok)] = b;
      }
    } else if (structured::IsOutputConstraintKey(key)) {
      // response_format / structured_outputs / guided_*: parsed together below.
    } else {
      return InvalidArgument("unknown key \"" + key + "\"");
    }
  }
  DSINFER_ASSIGN_OR_RETURN(structured::ConstraintSpec constraint,
                           structured::ParseOutputConstraint(line));
  if (constraint.active()) p.structured_outputs = engine::ToOutputConstraint(constraint);
  return r;
}

json ResultJson(const json& id, const RequestResult& result, bool with_text) {
  json out;
  out["id"] = id;
  if (!result.status.ok()) {
    out["error"] = {{"code", StatusCodeName(result.status.code())}, {"message", result.status.message()}};
  }
  if (result.completions.empty()) return out;
  out["prompt_tokens"] = result.prompt_tokens;
  json choices = json::array();
  int64_t completion_tokens = 0;
  double ttft = 0, e2e = 0;
  for (const auto& c : result.completions) {
    json ch = {{"index", c.index}, {"ids", c.ids}, {"finish_reason", FinishReasonName(c.finish)}};
    if (with_text) ch["text"] = c.text;
    if (!c.stop.empty()) ch["stop"] = c.stop;
    if (!c.logprobs.empty()) {
      json lps = json::array();
      for (const auto& lp : c.logprobs) {
        json e = {{"id", lp.id}, {"logprob", lp.logprob}};
        if (!lp.top.empty()) {
          e["top"] = json::array();
          for (const auto& t : lp.top) e["top"].push_back({{"id", t.id}, {"logprob", t.logprob}});
        }
        lps.push_back(e);
      }
      ch["logprobs"] = lps;
    }
    choices.push_back(ch);
    completion_tokens += static_cast<int64_t>(c.ids.size());
    ttft = std::max(ttft, c.ttft_s);
    e2e = std::max(e2e, c.e2e_s);
  }
  out["choices"] = choices;
  out["usage"] = {{"prompt_tokens", result.prompt_tokens}, {"completion_tokens", completion_tokens}};
  out["ttft_ms"] = ttft * 1e3;
  out["e2e_ms"] = e2e * 1e3;
  return out;
}

void AddChatMessages(const Engine& engine, const ChatOptions& chat, json* line) {
  if (!line->contains("choices")) return;
  for (auto& ch : (*line)["choices"]) {
    auto reply = engine.ParseChatReply(ch["ids"].get<std::vector<int32_t>>(), chat);
    if (!reply.ok()) continue;
    json message = {{"role", "assistant"}, {"content", reply->content}};
    if (!reply->reasoning_content.empty()) message["reasoning_content"] = reply->reasoning_content;
    if (!reply->tool_calls.empty()) {
      message["tool_calls"] = json::array();
      for (size_t i = 0; i < reply->tool_calls.size(); ++i) {
        const auto& call = reply->tool_calls[i];
        message["tool_calls"].push_back({{"id", "call_" + std::to_string(i)},
                                         {"type", "function"},
                                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    ch["message"] = message;
  }
}

}  // namespace dsinfer::cli
