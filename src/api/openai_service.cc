#include "api/openai_service.h"

#include <boost/asio/post.hpp>
#include <chrono>
#include <filesystem>

#include "api/generate_request.h"
#include "recipe/chat_encoder.h"
#include "request/json_text.h"
#include "request/request_parser.h"

namespace dsinfer::api {

namespace {

using json = nlohmann::json;
using Headers = std::map<std::string, std::string>;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Schema messages start with the quoted key they are about (request_parser.h).
std::string ParamOf(const std::string& message) {
  if (message.size() < 2 || message[0] != '"') return "";
  const size_t end = message.find('"', 1);
  return end == std::string::npos ? "" : message.substr(1, end - 1);
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kResourceExhausted:  // a prompt the state budget can never hold
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kCancelled:
      return 503;  // the engine is shutting down
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace

OpenAiService::OpenAiService(boost::asio::io_context* io, ServiceOptions options)
    : options_(std::move(options)) {
  context_.io = io;
  context_.metrics = &metrics_;
  context_.model_name = options_.served_model_name;
  if (context_.model_name.empty()) {
    context_.model_name = std::filesystem::path(options_.model_dir).lexically_normal().filename();
    if (context_.model_name.empty()) {
      context_.model_name =
          std::filesystem::path(options_.model_dir).lexically_normal().parent_path().filename();
    }
  }
  created_ = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
}

OpenAiService::~OpenAiService() = default;

void OpenAiService::SetEngine(Engine* engine, std::unique_ptr<tokenizer::Tokenizer> tokenizer) {
  tokenizer_ = std::move(tokenizer);
  context_.engine = engine;
  context_.tokenizer = tokenizer_.get();
  if (tokenizer_) {
    const bool has_system = tokenizer_->TokenToId(std::string(recipe::kSystem)).has_value();
    context_.dialect = recipe::DetectDialect(options_.model_dir, has_system);
    context_.think_end_id =
        tokenizer_->TokenToId(std::string(recipe::kThinkEnd)).value_or(int32_t{-1});
  }
  ready_ = true;
}

void OpenAiService::AbortAll() {
  for (auto& [id, call] : calls_) call->Abort();
}

void OpenAiService::Reply(Exchange& ex, const std::string& endpoint, int status, const json& body,
                          const Headers& headers) {
  metrics_.CountRequest(endpoint, status);
  ex.Respond(status, "application/json", Dump(body), headers);
}

void OpenAiService::Fail(Exchange& ex, const std::string& endpoint, int status,
                         const std::string& message, const Headers& headers,
                         const std::string& param) {
  Reply(ex, endpoint, status, response::ErrorBody(status, message, param), headers);
}

void OpenAiService::FailStatus(Exchange& ex, const std::string& endpoint, const Status& status,
                               const Headers& headers) {
  Fail(ex, endpoint, HttpStatusOf(status.code()), status.message(), headers,
       ParamOf(status.message()));
}

json OpenAiService::Models() const {
  json model = {{"id", context_.model_name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "dsinfer"},
                {"root", options_.model_dir}};
  if (context_.engine) model["max_model_len"] = context_.engine->max_model_len();
  return {{"object", "list"}, {"data", json::array({model})}};
}

void OpenAiService::Handle(std::shared_ptr<Exchange> ex, HttpRequest req) {
  Headers headers;
  if (std::string rid = req.Header("x-request-id"); !rid.empty()) headers["X-Request-Id"] = rid;
  const std::string& path = req.target;
  struct Route {
    const char* path;
    const char* method;
  };
  static const Route kRoutes[] = {{"/health", "GET"},          {"/metrics", "GET"},
                                  {"/v1/models", "GET"},       {"/v1/chat/completions", "POST"},
                                  {"/v1/completions", "POST"}, {"/tokenize", "POST"},
                                  {"/detokenize", "POST"}};
  const Route* route = nullptr;
  for (const auto& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (!route) return Fail(*ex, "other", 404, "no such path: " + path, headers);
  if (req.method != route->method) {
    return Fail(*ex, path, 405, std::string("use ") + route->method + " for " + path, headers);
  }
  if (path == "/metrics") {
    metrics_.CountRequest(path, 200);
    const EngineStats stats = context_.engine ? context_.engine->Stats() : EngineStats{};
    return ex->Respond(200, "text/plain; version=0.0.4",
                       metrics_.Render(context_.engine ? &stats : nullptr, open_calls()), headers);
  }
  if (!ready_) return Fail(*ex, path, 503, "the model is loading", headers);
  if (draining_) return Fail(*ex, path, 503, "the server is shutting down", headers);
  if (path == "/health") {
    metrics_.CountRequest(path, 200);
    return ex->Respond(200, "text/plain", "", headers);
  }
  if (!options_.api_key.empty() && req.Header("authorization") != "Bearer " + options_.api_key) {
    return Fail(*ex, path, 401, "invalid or missing API key (Authorization: Bearer ...)", headers);
  }
  if (path == "/v1/models") return Reply(*ex, path, 200, Models(), headers);
  if (path == "/tokenize") return Tokenize(*ex, req, headers);
  if (path == "/detokenize") return Detokenize(*ex, req, headers);
  const auto kind =
      path == "/v1/chat/completions" ? request::Kind::kChat : request::Kind::kCompletion;
  Generate(std::move(ex), req, kind, path, headers);
}

void OpenAiService::Generate(std::shared_ptr<Exchange> ex, const HttpRequest& req,
                             request::Kind kind, const std::string& endpoint,
                             const Headers& headers) {
  auto body = request::ParseJsonText(req.body);
  if (!body.ok()) return FailStatus(*ex, endpoint, body.status(), headers);
  request::Request defaults;
  defaults.sampling.max_tokens = kind == request::Kind::kChat ? INT32_MAX : 16;
  // The body again with its own key order: a JSON schema's property order is its generation order.
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(req.body, nullptr, false);
  auto parsed = request::ParseRequest(*body, kind, defaults, &ordered);
  if (!parsed.ok()) return FailStatus(*ex, endpoint, parsed.status(), headers);
  request::Request r = std::move(parsed).value();
  if (!r.model.empty() && r.model != context_.model_name) {
    return Fail(*ex, endpoint, 404, "the model `" + r.model + "` does not exist", headers, "model");
  }
  // A list of prompts: one engine request per prompt, n sequences each.
  auto engine_requests = std::make_shared<std::vector<GenerateRequest>>();
  for (const request::Request& one : request::SplitPrompts(r)) {
    engine_requests->push_back(ToGenerateRequest(one));
  }
  const int64_t prompts = static_cast<int64_t>(engine_requests->size());
  const int64_t n = r.sampling.n * prompts;
  const int64_t capacity = options_.max_running + options_.max_queued;
  if (prompts > 1 && n > capacity) {
    return Fail(*ex, endpoint, 429,
                "\"prompt\" holds " + std::to_string(prompts) + " prompts of " +
                    std::to_string(r.sampling.n) + " completions each: " + std::to_string(n) +
                    " sequences, more than the server's queue ever holds (" +
                    std::to_string(capacity) + "); send fewer prompts per request",
                headers, "prompt");
  }
  if (open_sequences_ + n > capacity) {
    return Fail(*ex, endpoint, 429,
                "the server's queue is full (" + std::to_string(options_.max_queued) +
                    " waiting sequences); retry later",
                headers);
  }
  open_sequences_ += n;
  ++submitting_;
  auto schema_request = std::make_shared<request::Request>(std::move(r));
  boost::asio::post(submitters_, [this, ex, engine_requests, schema_request, endpoint, headers, n] {
    // In prompt order; a prompt the engine refuses ends the others submitted before it.
    StatusOr<std::vector<std::shared_ptr<RequestStream>>> streams =
        std::vector<std::shared_ptr<RequestStream>>();
    for (size_t i = 0; i < engine_requests->size(); ++i) {
      auto stream = context_.engine->Submit((*engine_requests)[i]);
      if (stream.ok()) {
        streams->push_back(std::move(stream).value());
        continue;
      }
      for (const auto& s : *streams) context_.engine->Abort(s->id());
      streams = engine_requests->size() == 1
                    ? stream.status()
                    : Status(stream.status().code(), "\"prompt\" item " + std::to_string(i) + ": " +
                                                         stream.status().message());
      break;
    }
    boost::asio::post(*context_.io, [this, ex, schema_request, endpoint, headers, n,
                                     streams = std::move(streams)]() mutable {
      Submitted(ex, std::move(*schema_request), endpoint, headers, n, std::move(streams));
    });
  });
}

void OpenAiService::Submitted(std::shared_ptr<Exchange> ex, request::Request r,
                              const std::string& endpoint, const Headers& headers, int64_t n,
                              StatusOr<std::vector<std::shared_ptr<RequestStream>>> streams) {
  --submitting_;
  if (!streams.ok()) {
    open_sequences_ -= n;
    return FailStatus(*ex, endpoint, streams.status(), headers);
  }
  const uint64_t id = (*streams)[0]->id();
  if (ex->closed()) {  // the client left while the prompt was encoded
    for (const auto& s : *streams) context_.engine->Abort(s->id());
    open_sequences_ -= n;
    metrics_.CountAbort();
    metrics_.CountRequest(endpoint, 499);
    return;
  }
  auto call = std::make_shared<GenerationCall>(&context_, std::move(r), ex, std::move(*streams),
                                               endpoint, headers, [this, id, n] {
                                                 open_sequences_ -= n;
                                                 calls_.erase(id);
                                               });
  calls_[id] = call;
  call->Start();
}

void OpenAiService::Tokenize(Exchange& ex, const HttpRequest& req, const Headers& headers) {
  const std::string endpoint = "/tokenize";
  if (!tokenizer_) return Fail(ex, endpoint, 400, "this model has no tokenizer", headers);
  auto body = request::ParseJsonText(req.body);
  if (!body.ok()) return FailStatus(ex, endpoint, body.status(), headers);
  if (!body->is_object()) return Fail(ex, endpoint, 400, "the body must be a JSON object", headers);
  for (const auto& [key, v] : body->items()) {
    if (key != "model" && key != "prompt" && key != "messages" && key != "tools" &&
        key != "add_special_tokens" && key != "chat_template_kwargs" && key != "reasoning_effort") {
      return Fail(ex, endpoint, 400, "\"" + key + "\" is not a known request key", headers, key);
    }
  }
  if (body->contains("model") && (*body)["model"] != context_.model_name) {
    return Fail(ex, endpoint, 404, "the model does not exist", headers, "model");
  }
  std::vector<int32_t> ids;
  if (body->contains("prompt") && (*body)["prompt"].is_string()) {
    ids = tokenizer_->Encode((*body)["prompt"].get<std::string>(), /*allow_special=*/true);
  } else if (body->contains("messages")) {
    json chat = *body;
    chat.erase("add_special_tokens");
    auto r = request::ParseRequest(chat, request::Kind::kChat, request::Request{});
    if (!r.ok()) return FailStatus(ex, endpoint, r.status(), headers);
    recipe::EncodeOptions options;
    options.dialect = context_.dialect;
    options.thinking = r->thinking ? recipe::ThinkingMode::kThinking : recipe::ThinkingMode::kChat;
    options.reasoning_effort = r->reasoning_effort;
    if (!r->tools_json.empty()) options.tools = json::parse(r->tools_json);
    auto prompt = recipe::EncodeMessages(r->messages, options);
    if (!prompt.ok()) return FailStatus(ex, endpoint, prompt.status(), headers);
    auto rendered = prompt->ToIds(*tokenizer_);
    if (!rendered.ok()) return FailStatus(ex, endpoint, rendered.status(), headers);
    ids = std::move(rendered).value();
  } else {
    return Fail(ex, endpoint, 400, "\"prompt\" (a string) or \"messages\" is required", headers,
                "prompt");
  }
  Reply(
      ex, endpoint, 200,
      {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context_.engine->max_model_len()}},
      headers);
}

void OpenAiService::Detokenize(Exchange& ex, const HttpRequest& req, const Headers& headers) {
  const std::string endpoint = "/detokenize";
  if (!tokenizer_) return Fail(ex, endpoint, 400, "this model has no tokenizer", headers);
  auto body = request::ParseJsonText(req.body);
  if (!body.ok()) return FailStatus(ex, endpoint, body.status(), headers);
  if (!body->is_object() || !body->contains("tokens") || !(*body)["tokens"].is_array()) {
    return Fail(ex, endpoint, 400, "\"tokens\" (an array of token ids) is required", headers,
                "tokens");
  }
  for (const auto& [key, v] : body->items()) {
    if (key != "model" && key != "tokens") {
      return Fail(ex, endpoint, 400, "\"" + key + "\" is not a known request key", headers, key);
    }
  }
  std::vector<int32_t> ids;
  for (const auto& t : (*body)["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= context_.engine->vocab_size()) {
      return Fail(ex, endpoint, 400, "\"tokens\" must hold token ids in [0, vocab size)", headers,
                  "tokens");
    }
    ids.push_back(t.get<int32_t>());
  }
  Reply(ex, endpoint, 200, {{"prompt", tokenizer_->Decode(ids)}}, headers);
}

}  // namespace dsinfer::api
