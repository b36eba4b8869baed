#include "request/request_parser.h"

#include <functional>
#include <limits>
#include <map>
#include <string>

#include "request/output_constraint.h"

namespace dsinfer::request {

namespace {

using json = nlohmann::json;

Status Bad(const std::string& key, const std::string& what) {
  return InvalidArgument("\"" + key + "\" " + what);
}

Status GetFloat(const json& v, const std::string& key, float* out) {
  if (!v.is_number()) return Bad(key, "must be a number");
  const double x = v.get<double>();
  if (!(x >= -1e30 && x <= 1e30)) return Bad(key, "is out of range");
  *out = static_cast<float>(x);
  return Status::Ok();
}

Status GetInt(const json& v, const std::string& key, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return Bad(key, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return Bad(key, "must be <= " + std::to_string(hi) + ", got " + v.dump());
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo) return Bad(key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(x));
  if (x > hi) return Bad(key, "must be <= " + std::to_string(hi) + ", got " + std::to_string(x));
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

Status GetString(const json& v, const std::string& key, std::string* out) {
  if (!v.is_string()) return Bad(key, "must be a string");
  *out = v.get<std::string>();
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

Status SetMaxTokens(const json& v, const std::string& key, Request* r) {
  DSINFER_RETURN_IF_ERROR(GetInt32(v, key, &r->sampling.max_tokens));
  if (r->sampling.max_tokens < 1) {
    return Bad(key, "must be >= 1, got " + std::to_string(r->sampling.max_tokens));
  }
  r->max_tokens_given = true;
  return Status::Ok();
}

Status SetPromptText(const json& v, const std::string& key, Request* r) {
  DSINFER_RETURN_IF_ERROR(GetString(v, key, &r->prompt));
  if (r->prompt.empty()) return Bad(key, "is empty");
  return Status::Ok();
}

Status SetPromptIds(const json& v, const std::string& key, Request* r) {
  DSINFER_RETURN_IF_ERROR(GetIds(v, key, &r->prompt_ids));
  if (r->prompt_ids.empty()) return Bad(key, "is empty");
  return Status::Ok();
}

// /v1/completions' prompt: text, token ids, or a list of prompts (strings or arrays of token
// ids, mixed as the client likes). A one-element list is that prompt.
Status SetCompletionPrompt(const json& v, const std::string& key, Request* r) {
  if (v.is_string()) return SetPromptText(v, key, r);
  if (!v.is_array()) {
    return Bad(key,
               "must be a string, an array of token ids, or an array of strings or of arrays of "
               "token ids");
  }
  if (v.empty()) return Bad(key, "is an empty list");
  if (!v[0].is_string() && !v[0].is_array()) return SetPromptIds(v, key, r);
  std::vector<Prompt> prompts(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = "item " + std::to_string(i);
    if (v[i].is_string()) {
      prompts[i].text = v[i].get<std::string>();
      if (prompts[i].text.empty()) return Bad(key, item + " is an empty string");
    } else if (v[i].is_array()) {
      for (const auto& x : v[i]) {
        int64_t id = 0;
        if (!GetInt(x, key, 0, INT32_MAX, &id).ok()) {
          return Bad(key, item + " must be an array of token ids (integers >= 0), got " + x.dump());
        }
        prompts[i].ids.push_back(static_cast<int32_t>(id));
      }
      if (prompts[i].ids.empty()) return Bad(key, item + " is an empty array");
    } else {
      return Bad(key, item + " must be a string or an array of token ids, got " + v[i].dump());
    }
  }
  if (prompts.size() == 1) {
    r->prompt = std::move(prompts[0].text);
    r->prompt_ids = std::move(prompts[0].ids);
  } else {
    r->prompts = std::move(prompts);
  }
  return Status::Ok();
}

Status SetMessages(const json& v, const std::string& key, Request* r) {
  if (!v.is_array() || v.empty()) return Bad(key, "must be a non-empty array");
  for (const auto& m : v) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Bad(key, "entries must be objects with a string \"role\"");
    }
  }
  // The recipe validates roles, content parts, tool calls and tool results when it renders.
  r->messages = v;
  return Status::Ok();
}

Status SetStop(const json& v, const std::string& key, Request* r) {
  auto& stop = r->sampling.stop;
  stop.clear();
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
    return Status::Ok();
  }
  if (!v.is_array()) return Bad(key, "must be a string or an array of strings");
  for (const auto& s : v) {
    if (!s.is_string()) return Bad(key, "must be a string or an array of strings");
    stop.push_back(s.get<std::string>());
  }
  return Status::Ok();
}

Status SetLogitBias(const json& v, const std::string& key, Request* r) {
  if (!v.is_object()) return Bad(key, "must be an object {\"token id\": bias}");
  r->sampling.logit_bias.clear();
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
    r->sampling.logit_bias[static_cast<int32_t>(tok)] = b;
  }
  return Status::Ok();
}

Status SetSeed(const json& v, const std::string& key, Request* r) {
  int64_t seed = 0;
  DSINFER_RETURN_IF_ERROR(GetInt(v, key, 0, std::numeric_limits<int64_t>::max(), &seed));
  r->sampling.seed = static_cast<uint64_t>(seed);
  return Status::Ok();
}

// Chat and JSONL: true / false. Completions: the number of alternatives (0 = the chosen token's
// logprob only). JSONL also takes the number, as the completions schema does.
Status SetLogprobs(const json& v, const std::string& key, Kind kind, Request* r) {
  if (v.is_boolean() && kind != Kind::kCompletion) {
    r->sampling.logprobs = v.get<bool>();
    return Status::Ok();
  }
  if (kind == Kind::kChat) return Bad(key, "must be true or false");
  int64_t top = 0;
  DSINFER_RETURN_IF_ERROR(GetInt(v, key, 0, 20, &top));
  r->sampling.logprobs = true;
  r->sampling.top_logprobs = static_cast<int>(top);
  return Status::Ok();
}

Status SetStreamOptions(const json& v, const std::string& key, Request* r) {
  if (!v.is_object()) return Bad(key, "must be an object");
  for (const auto& [k, x] : v.items()) {
    if (k == "include_usage") {
      if (!x.is_null()) DSINFER_RETURN_IF_ERROR(GetBool(x, key + "." + k, &r->include_usage));
    } else if (k != "continuous_usage_stats") {
      return Bad(key + "." + k, "is not a known request key");
    }
  }
  return Status::Ok();
}

Status SetTemplateKwargs(const json& v, const std::string& key, Request* r) {
  if (!v.is_object()) return Bad(key, "must be an object");
  for (const auto& [k, x] : v.items()) {
    if (k == "thinking" || k == "enable_thinking") {
      DSINFER_RETURN_IF_ERROR(GetBool(x, key + "." + k, &r->thinking));
    } else if (k == "reasoning_effort") {
      DSINFER_RETURN_IF_ERROR(GetString(x, key + "." + k, &r->reasoning_effort));
    } else {
      return Bad(key + "." + k,
                 "is not a known chat template argument (thinking, "
                 "enable_thinking, reasoning_effort)");
    }
  }
  return Status::Ok();
}

Status SetToolChoice(const json& v, const std::string& key, Request* r) {
  // "required" and named functions are constraints: ParseOutputConstraint decides on them.
  r->tool_choice =
      v.is_string() && v.get<std::string>() == "none" ? ToolChoice::kNone : ToolChoice::kAuto;
  return Status::Ok();
}

// Which kinds accept a key.
enum Kinds : unsigned { kJ = 1, kC = 2, kP = 4, kAll = 7, kChatLike = kJ | kC };

using Setter = std::function<Status(const json&, const std::string&, Kind, Request*)>;

struct Field {
  unsigned kinds;
  Setter set;
};

template <typename F>
Setter Plain(F f) {
  return [f](const json& v, const std::string& key, Kind, Request* r) { return f(v, key, r); };
}

Setter Int32Of(int sampler::SamplingParams::*field) {
  return [field](const json& v, const std::string& key, Kind, Request* r) {
    return GetInt32(v, key, &(r->sampling.*field));
  };
}

Setter FloatOf(float sampler::SamplingParams::*field) {
  return [field](const json& v, const std::string& key, Kind, Request* r) {
    return GetFloat(v, key, &(r->sampling.*field));
  };
}

Setter BoolOf(bool sampler::SamplingParams::*field) {
  return [field](const json& v, const std::string& key, Kind, Request* r) {
    return GetBool(v, key, &(r->sampling.*field));
  };
}

Setter Ignored() {
  return [](const json&, const std::string&, Kind, Request*) { return Status::Ok(); };
}

Setter Refused(const std::string& why) {
  return [why](const json&, const std::string& key, Kind, Request*) { return Bad(key, why); };
}

const std::map<std::string, Field>& Fields() {
  using SP = sampler::SamplingParams;
  static const auto* fields = new std::map<std::string, Field>{
      {"model", {kAll, Plain([](const json& v, const std::string& k, Request* r) {
                   return GetString(v, k, &r->model);
                 })}},
      {"stream", {kAll, Plain([](const json& v, const std::string& k, Request* r) {
                    return GetBool(v, k, &r->stream);
                  })}},
      {"stream_options", {kAll, Plain(SetStreamOptions)}},
      {"user", {kAll, Plain([](const json& v, const std::string& k, Request* r) {
                  return GetString(v, k, &r->user);
                })}},
      {"metadata", {kAll, Plain([](const json& v, const std::string& k, Request*) {
                      return v.is_object() ? Status::Ok() : Bad(k, "must be an object");
                    })}},
      {"id", {kAll, Plain([](const json& v, const std::string&, Request* r) {
                r->id = v;
                return Status::Ok();
              })}},
      {"n", {kAll, Int32Of(&SP::n)}},
      {"top_k", {kAll, Int32Of(&SP::top_k)}},
      {"min_tokens", {kAll, Int32Of(&SP::min_tokens)}},
      {"temperature", {kAll, FloatOf(&SP::temperature)}},
      {"top_p", {kAll, FloatOf(&SP::top_p)}},
      {"min_p", {kAll, FloatOf(&SP::min_p)}},
      {"repetition_penalty", {kAll, FloatOf(&SP::repetition_penalty)}},
      {"presence_penalty", {kAll, FloatOf(&SP::presence_penalty)}},
      {"frequency_penalty", {kAll, FloatOf(&SP::frequency_penalty)}},
      {"ignore_eos", {kAll, BoolOf(&SP::ignore_eos)}},
      {"include_stop_str_in_output", {kAll, BoolOf(&SP::include_stop_str_in_output)}},
      {"seed", {kAll, Plain(SetSeed)}},
      {"stop", {kAll, Plain(SetStop)}},
      {"stop_token_ids", {kAll, Plain([](const json& v, const std::string& k, Request* r) {
                            return GetIds(v, k, &r->sampling.stop_token_ids);
                          })}},
      {"logit_bias", {kAll, Plain(SetLogitBias)}},
      {"max_tokens", {kAll, Plain(SetMaxTokens)}},
      {"max_completion_tokens", {kChatLike, Plain(SetMaxTokens)}},
      {"logprobs", {kAll, SetLogprobs}},
      {"top_logprobs", {kChatLike, Int32Of(&SP::top_logprobs)}},
      {"priority", {kAll, Plain([](const json& v, const std::string& k, Request* r) {
                      return GetInt32(v, k, &r->priority);
                    })}},
      // Read by ParseOutputConstraint.
      {"response_format", {kAll, Ignored()}},
      {"structured_outputs", {kAll, Ignored()}},
      {"tool_choice", {kChatLike, Plain(SetToolChoice)}},
      // Chat.
      {"messages", {kChatLike, Plain(SetMessages)}},
      {"tools", {kChatLike, Plain([](const json& v, const std::string& k, Request* r) {
                   if (!v.is_array()) return Bad(k, "must be an array of tool definitions");
                   r->tools_json = v.empty() ? "" : v.dump();
                   return Status::Ok();
                 })}},
      {"parallel_tool_calls",
       {kChatLike, Plain([](const json& v, const std::string& k, Request* r) {
          return GetBool(v, k, &r->parallel_tool_calls);
        })}},
      {"reasoning_effort", {kChatLike, Plain([](const json& v, const std::string& k, Request* r) {
                              return GetString(v, k, &r->reasoning_effort);
                            })}},
      {"chat_template_kwargs", {kChatLike, Plain(SetTemplateKwargs)}},
      {"thinking", {kChatLike, Plain([](const json& v, const std::string& k, Request* r) {
                      return GetBool(v, k, &r->thinking);
                    })}},
      // Prompts.
      {"prompt", {kJ | kP, Plain(SetCompletionPrompt)}},
      {"prompt_ids", {kJ, Plain(SetPromptIds)}},
      {"echo", {kP, Plain([](const json& v, const std::string& k, Request* r) {
                  return GetBool(v, k, &r->echo);
                })}},
      {"prompt_logprobs", {kJ | kP, Plain([](const json& v, const std::string& k, Request* r) {
                             if (v.is_null()) return Status::Ok();
                             int64_t top = 0;
                             DSINFER_RETURN_IF_ERROR(GetInt(v, k, 0, 20, &top));
                             r->sampling.prompt_logprobs = static_cast<int>(top);
                             return Status::Ok();
                           })}},
      {"suffix", {kP, Refused("is not supported (DeepSeek-V4 has no fill-in-the-middle)")}},
  };
  return *fields;
}

unsigned KindBit(Kind kind) {
  switch (kind) {
    case Kind::kJsonl:
      return kJ;
    case Kind::kChat:
      return kC;
    case Kind::kCompletion:
      return kP;
  }
  return 0;
}

}  // namespace

StatusOr<Request> ParseRequest(const json& body, Kind kind, const Request& defaults,
                               const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) return InvalidArgument("a request must be a JSON object");
  Request r = defaults;
  r.kind = kind;
  r.prompt.clear();
  r.prompt_ids.clear();
  r.prompts.clear();
  r.messages = nullptr;
  const auto& fields = Fields();
  for (const auto& [key, v] : body.items()) {
    // response_format / structured_outputs / guided_*: read by ParseOutputConstraint below.
    if (structured::IsOutputConstraintKey(key)) continue;
    auto it = fields.find(key);
    if (it == fields.end() || !(it->second.kinds & KindBit(kind))) {
      return Bad(key, "is not a known request key");
    }
    if (v.is_null() && key != "id") {
      if (key == "seed") r.sampling.seed.reset();
      continue;
    }
    DSINFER_RETURN_IF_ERROR(it->second.set(v, key, kind, &r));
  }
  // Keys that say the same thing must agree (objects iterate in key order, so "the later key
  // wins" would be an accident of spelling).
  auto given = [&](const json& obj, const char* k) { return obj.contains(k) && !obj[k].is_null(); };
  if (given(body, "max_tokens") && given(body, "max_completion_tokens") &&
      body["max_tokens"] != body["max_completion_tokens"]) {
    return Bad("max_completion_tokens", "disagrees with \"max_tokens\"");
  }
  if (given(body, "chat_template_kwargs") && body["chat_template_kwargs"].is_object()) {
    const json& kw = body["chat_template_kwargs"];
    std::vector<json> values;
    for (const char* k : {"thinking", "enable_thinking"}) {
      if (given(kw, k)) values.push_back(kw[k]);
    }
    if (given(body, "thinking")) values.push_back(body["thinking"]);
    for (const auto& v : values) {
      if (v != values[0]) return Bad("chat_template_kwargs", "disagrees with \"thinking\"");
    }
  }
  const int sources =
      !r.prompt.empty() + !r.prompt_ids.empty() + !r.prompts.empty() + !r.messages.is_null();
  if (sources != 1) {
    switch (kind) {
      case Kind::kChat:
        return Bad("messages", "is required");
      case Kind::kCompletion:
        return Bad("prompt", "is required");
      case Kind::kJsonl:
        return InvalidArgument(
            "a request needs exactly one of \"prompt\", \"prompt_ids\" and "
            "\"messages\"");
    }
  }
  if (r.messages.is_null() && (!r.tools_json.empty() || r.thinking)) {
    return Bad(r.thinking ? "thinking" : "tools", "needs \"messages\" (a chat request)");
  }
  if (r.include_usage && !r.stream && body.contains("stream_options")) {
    return Bad("stream_options", "is only allowed with \"stream\": true");
  }
  DSINFER_ASSIGN_OR_RETURN(r.sampling.structured_outputs, ParseOutputConstraint(body, ordered));
  // Legacy completions: echo with logprobs returns the prompt tokens' logprobs too (what lm-eval's
  // loglikelihood tasks read), with as many alternatives.
  if (kind == Kind::kCompletion && r.echo && r.sampling.logprobs) {
    r.sampling.prompt_logprobs = std::max(r.sampling.prompt_logprobs, r.sampling.top_logprobs);
  }
  if (r.stream && r.sampling.prompt_logprobs >= 0) {
    return Bad(body.contains("prompt_logprobs") ? "prompt_logprobs" : "echo",
               "prompt logprobs are returned by non-streaming requests only");
  }
  DSINFER_RETURN_IF_ERROR(r.sampling.Validate());
  return r;
}

std::vector<Request> SplitPrompts(const Request& r) {
  if (r.prompts.empty()) return {r};
  std::vector<Request> out;
  out.reserve(r.prompts.size());
  for (const Prompt& p : r.prompts) {
    Request one = r;
    one.prompts.clear();
    one.prompt = p.text;
    one.prompt_ids = p.ids;
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace dsinfer::request
