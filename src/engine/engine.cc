// dsinfer::Engine (include/dsinfer/engine.h): the public face of EngineLoop.
#include "dsinfer/engine.h"

#include "base/status.h"
#include "engine/engine_loop.h"

namespace dsinfer {

const char* SpeculativeMethodName(SpeculativeOptions::Method method) {
  switch (method) {
    case SpeculativeOptions::Method::kNone:
      return "none";
    case SpeculativeOptions::Method::kNgram:
      return "ngram";
    case SpeculativeOptions::Method::kMtp:
      return "mtp";
    case SpeculativeOptions::Method::kDSpark:
      return "dspark";
  }
  return "?";
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "";
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  DSINFER_ASSIGN_OR_RETURN(auto core, engine::EngineCore::Create(options));
  std::unique_ptr<Engine> e(new Engine());
  e->loop_ = std::make_unique<engine::EngineLoop>(std::move(core));
  return e;
}

Engine::~Engine() = default;

StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(const GenerateRequest& request) {
  return loop_->Submit(request);
}

void Engine::Abort(uint64_t request_id) { loop_->Abort(request_id); }

EngineStats Engine::Stats() const { return loop_->Stats(); }

int64_t Engine::vocab_size() const { return loop_->core().vocab_size(); }
int64_t Engine::max_model_len() const { return loop_->core().max_model_len(); }
bool Engine::has_tokenizer() const { return loop_->core().has_tokenizer(); }
StatusOr<ChatReply> Engine::ParseChatReply(const std::vector<int32_t>& ids,
                                           const ChatOptions& chat) const {
  return loop_->core().codec().ParseChat(ids, chat);
}
std::string Engine::device() const { return loop_->core().device(); }
int64_t Engine::max_batch_tokens() const { return loop_->core().max_batch_tokens(); }
std::string Engine::model_family() const { return loop_->core().model_family(); }
std::string Engine::MemoryPlanDescription() const { return loop_->core().cache().plan().Describe(); }

RequestResult CollectResult(RequestStream& stream, int n) {
  RequestResult result;
  result.id = stream.id();
  result.completions.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) result.completions[k].index = k;
  StreamEvent ev;
  while (stream.Next(&ev)) {
    Completion& c = result.completions[ev.index];
    c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
    c.text += ev.text;
    c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    result.prompt_logprobs.insert(result.prompt_logprobs.end(), ev.prompt_logprobs.begin(),
                                  ev.prompt_logprobs.end());
    if (ev.finish != FinishReason::kNone) {
      c.finish = ev.finish;
      c.stop = ev.stop;
      c.ttft_s = ev.ttft_s;
      c.e2e_s = ev.e2e_s;
      c.draft_tokens = ev.draft_tokens;
      c.accepted_tokens = ev.accepted_tokens;
      result.prompt_tokens = ev.prompt_tokens;
      if (!ev.error.ok()) result.status = ev.error;
    }
  }
  return result;
}

std::vector<RequestResult> Engine::Generate(const std::vector<GenerateRequest>& requests) {
  std::vector<RequestResult> results(requests.size());
  std::vector<std::shared_ptr<RequestStream>> streams(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto stream = Submit(requests[i]);
    if (stream.ok()) {
      streams[i] = *stream;
    } else {
      results[i].status = stream.status();
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (streams[i]) results[i] = CollectResult(*streams[i], requests[i].params.n);
  }
  return results;
}

}  // namespace dsinfer
