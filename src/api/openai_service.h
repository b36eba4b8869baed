// OpenAiService: the OpenAI-compatible HTTP API on an Engine — routes (/health, /v1/models,
// /v1/chat/completions, /v1/completions, /tokenize, /detokenize, /metrics), the API key, the
// model name, the bounded queue and the mapping of every error to an OpenAI error object:
// 400 bad request (malformed JSON, invalid UTF-8, unknown keys, prompt or max_tokens beyond the
// context), 401 bad key, 404 unknown model or path, 405 wrong method, 413 body too large (the
// transport), 429 queue full, 503 loading or draining. io thread only, except where noted.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "api/generation_call.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "dsinfer/engine.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::api {

struct ServiceOptions {
  std::string model_dir;
  std::string served_model_name;  // "" = the model dir's name
  std::string api_key;            // "" = no key needed
  // The queue: generation sequences (n per prompt of a request) beyond max_running that may
  // wait; a request that would exceed it gets 429.
  int64_t max_queued = 1024;
  int64_t max_running = 64;
};

class OpenAiService {
 public:
  OpenAiService(boost::asio::io_context* io, ServiceOptions options);
  ~OpenAiService();

  // The HTTP handler (io thread).
  void Handle(std::shared_ptr<Exchange> exchange, HttpRequest request);
  // The model is loaded: from now on /health is 200 and requests are served. io thread.
  void SetEngine(Engine* engine, std::unique_ptr<tokenizer::Tokenizer> tokenizer);
  // Stop admitting (503); in-flight requests go on. io thread.
  void StartDrain() { draining_ = true; }
  // Aborts every request in flight (their replies end with finish_reason "abort"). io thread.
  void AbortAll();
  // Generation requests in flight (being submitted or generating). io thread.
  int64_t open_calls() const { return static_cast<int64_t>(calls_.size()) + submitting_; }
  // Waits for the submissions in progress (before the engine goes away). Any thread.
  void JoinSubmitters() { submitters_.join(); }
  const std::string& model_name() const { return context_.model_name; }

 private:
  void Reply(Exchange& ex, const std::string& endpoint, int status, const nlohmann::json& body,
             const std::map<std::string, std::string>& headers);
  void Fail(Exchange& ex, const std::string& endpoint, int status, const std::string& message,
            const std::map<std::string, std::string>& headers, const std::string& param = "");
  void FailStatus(Exchange& ex, const std::string& endpoint, const Status& status,
                  const std::map<std::string, std::string>& headers);
  void Generate(std::shared_ptr<Exchange> ex, const HttpRequest& req, request::Kind kind,
                const std::string& endpoint, const std::map<std::string, std::string>& headers);
  // io thread, after Engine::Submit returned on a submitter thread for every prompt of `r` (one
  // stream per prompt, or the first refusal). `sequences`: what the request holds of the queue.
  void Submitted(std::shared_ptr<Exchange> ex, request::Request r, const std::string& endpoint,
                 const std::map<std::string, std::string>& headers, int64_t sequences,
                 StatusOr<std::vector<std::shared_ptr<RequestStream>>> streams);
  void Tokenize(Exchange& ex, const HttpRequest& req,
                const std::map<std::string, std::string>& headers);
  void Detokenize(Exchange& ex, const HttpRequest& req,
                  const std::map<std::string, std::string>& headers);
  nlohmann::json Models() const;

  ServiceOptions options_;
  CallContext context_;
  ServerMetrics metrics_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  bool ready_ = false;
  bool draining_ = false;
  int64_t open_sequences_ = 0;  // of admitted requests (the queue bound)
  int64_t submitting_ = 0;
  // Engine::Submit tokenizes and renders the prompt on the calling thread: it runs here, never
  // on the io thread.
  boost::asio::thread_pool submitters_{2};
  int64_t created_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<GenerationCall>> calls_;
};

}  // namespace dsinfer::api
