// GenerationCall: one /v1/chat/completions or /v1/completions request in flight, from its
// engine RequestStreams (one per prompt: a completions request with a list of prompts has several;
// choice p * n + j is completion j of prompt p) to its HTTP reply. The engine thread only signals
// (RequestStream::SetNotify posts Drain() to the io_context); Drain() takes the queued events of
// every stream without blocking and turns them into SSE chunks (stream) or, at the end, one
// response body. Chat text runs through a
// response::ChatStream per choice as it arrives, so a streamed reply's deltas are exactly the
// unstreamed message. Abort() (client gone, drain deadline) asks the engine to end every
// request of the call; their final events still arrive and complete the call, which frees it. A
// completion that fails aborts the other prompts' requests and the reply is an error. io thread
// only.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/metrics.h"
#include "dsinfer/engine.h"
#include "recipe/dialect.h"
#include "request/request.h"
#include "response/chat_stream.h"
#include "response/openai_json.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::api {

// What every call shares (owned by the service; outlives the calls).
struct CallContext {
  boost::asio::io_context* io = nullptr;
  Engine* engine = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // null: the model has no tokenizer
  recipe::Dialect dialect = recipe::Dialect::kV4;
  int32_t think_end_id = -1;
  std::string model_name;
  ServerMetrics* metrics = nullptr;
};

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  // `streams`: one per prompt of `request` (request::SplitPrompts order). `on_done` runs once,
  // when the reply has ended (or the client has gone) and the engine has finished every
  // completion.
  GenerationCall(const CallContext* context, request::Request request,
                 std::shared_ptr<Exchange> exchange,
                 std::vector<std::shared_ptr<RequestStream>> streams, std::string endpoint,
                 std::map<std::string, std::string> reply_headers, std::function<void()> on_done);

  void Start();
  void Abort();
  uint64_t id() const { return streams_[0]->id(); }
  int sequences() const { return request_.sampling.n * static_cast<int>(streams_.size()); }

 private:
  struct Choice {
    int prompt = 0;  // which stream
    std::vector<int32_t> ids;
    std::string text;
    std::vector<response::LogprobEntry> logprobs;
    std::unique_ptr<response::ChatStream> chat;
    int64_t text_offset = 0;  // completions: text offset of the next token
    std::string finish;       // "" while open
  };

  // prompt_logprobs: per prompt stream, its ids and the logprobs of tokens 1..n-1.
  std::vector<std::vector<int32_t>> prompt_ids_;
  std::vector<std::vector<response::LogprobEntry>> prompt_logprobs_;
  // vLLM's choice field: [null, {"id": {"logprob", "rank", "decoded_token"}}, ...].
  nlohmann::json PromptLogprobsJson(int prompt) const;
  // Legacy completions with echo: the prompt's tokens (the first without a logprob), then the
  // completion's, `top` alternatives each.
  nlohmann::json EchoLogprobsJson(const Choice& c, int top) const;

  void Drain();
  void OnEvent(int prompt, StreamEvent& ev);
  void AbortStreams();
  void StreamChunk(int index, const nlohmann::json& delta_or_text, const nlohmann::json& logprobs,
                   const std::string& finish);
  void Complete();
  nlohmann::json Usage() const;
  nlohmann::json LogprobsJson(const std::vector<response::LogprobEntry>& entries,
                              int64_t offset) const;
  bool chat() const { return request_.kind == request::Kind::kChat; }

  const CallContext* context_;
  request::Request request_;
  std::shared_ptr<Exchange> exchange_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::string endpoint_;
  std::map<std::string, std::string> reply_headers_;
  std::function<void()> on_done_;
  std::shared_ptr<std::atomic<bool>> scheduled_ = std::make_shared<std::atomic<bool>>(false);
  std::string response_id_;
  int64_t created_ = 0;
  std::vector<std::string> echo_texts_;  // per prompt
  std::vector<Choice> choices_;
  int open_ = 0;
  std::vector<int64_t> prompt_tokens_;  // per prompt
  bool aborted_ = false;
  bool failed_ = false;
  Status error_;
  bool done_ = false;
};

}  // namespace dsinfer::api
