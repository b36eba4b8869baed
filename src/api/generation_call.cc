#include "api/generation_call.h"

#include <boost/asio/post.hpp>
#include <chrono>

namespace dsinfer::api {

namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

GenerationCall::GenerationCall(const CallContext* context, request::Request request,
                               std::shared_ptr<Exchange> exchange,
                               std::vector<std::shared_ptr<RequestStream>> streams,
                               std::string endpoint,
                               std::map<std::string, std::string> reply_headers,
                               std::function<void()> on_done)
    : context_(context),
      request_(std::move(request)),
      exchange_(std::move(exchange)),
      streams_(std::move(streams)),
      endpoint_(std::move(endpoint)),
      reply_headers_(std::move(reply_headers)),
      on_done_(std::move(on_done)) {
  response_id_ = response::NewResponseId(chat() ? "chatcmpl" : "cmpl");
  created_ = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  const int n = request_.sampling.n;
  const int prompts = static_cast<int>(streams_.size());
  choices_.resize(static_cast<size_t>(n) * prompts);
  open_ = n * prompts;
  prompt_tokens_.assign(prompts, 0);
  echo_texts_.assign(prompts, "");
  prompt_ids_.assign(prompts, {});
  prompt_logprobs_.assign(prompts, {});
  if (request_.echo && context_->tokenizer) {
    for (int p = 0; p < prompts; ++p) {
      const std::string& text =
          request_.prompts.empty() ? request_.prompt : request_.prompts[p].text;
      const std::vector<int32_t>& ids =
          request_.prompts.empty() ? request_.prompt_ids : request_.prompts[p].ids;
      echo_texts_[p] = !text.empty() ? text : context_->tokenizer->Decode(ids, true);
    }
  }
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    c.prompt = static_cast<int>(i) / n;
    if (chat()) {
      c.chat = std::make_unique<response::ChatStream>(context_->dialect, request_.thinking,
                                                      request_.parallel_tool_calls, response_id_);
    }
    c.text_offset = static_cast<int64_t>(echo_texts_[c.prompt].size());
  }
}

void GenerationCall::Start() {
  exchange_->OnClose([w = weak_from_this()] {
    if (auto self = w.lock()) self->Abort();
  });
  if (request_.stream) {
    exchange_->StartEvents(reply_headers_);
    for (int i = 0; i < static_cast<int>(choices_.size()); ++i) {
      if (chat()) {
        StreamChunk(i, json{{"role", "assistant"}, {"content", ""}}, nullptr, "");
      } else if (!echo_texts_[choices_[i].prompt].empty()) {
        StreamChunk(i, echo_texts_[choices_[i].prompt], nullptr, "");
      }
    }
  }
  // The engine thread only posts; Drain() runs here, on the io thread.
  // One Drain() takes the events of every stream.
  auto* io = context_->io;
  for (auto& stream : streams_) {
    stream->SetNotify([w = weak_from_this(), scheduled = scheduled_, io] {
      if (scheduled->exchange(true)) return;
      boost::asio::post(*io, [w] {
        if (auto self = w.lock()) self->Drain();
      });
    });
  }
}

void GenerationCall::Abort() {
  if (aborted_ || done_) return;
  aborted_ = true;
  AbortStreams();
}

void GenerationCall::AbortStreams() {
  for (auto& stream : streams_) context_->engine->Abort(stream->id());
}

void GenerationCall::Drain() {
  scheduled_->store(false);
  auto self = shared_from_this();  // Complete() may drop the service's reference
  StreamEvent ev;
  for (size_t p = 0; p < streams_.size(); ++p) {
    while (!done_ && streams_[p]->TryNext(&ev)) OnEvent(static_cast<int>(p), ev);
  }
}

void GenerationCall::OnEvent(int prompt, StreamEvent& ev) {
  const int n = request_.sampling.n;
  if (ev.index < 0 || ev.index >= n) return;
  const int index = prompt * n + ev.index;
  Choice& c = choices_[index];
  c.ids.insert(c.ids.end(), ev.ids.begin(), ev.ids.end());
  std::vector<response::LogprobEntry> lps;
  for (const auto& lp : ev.logprobs) {
    response::LogprobEntry e{lp.id, lp.logprob, {}};
    for (const auto& t : lp.top) e.top.emplace_back(t.id, t.logprob);
    lps.push_back(std::move(e));
  }
  c.logprobs.insert(c.logprobs.end(), lps.begin(), lps.end());
  if (!ev.prompt_ids.empty()) {
    prompt_ids_[prompt] = ev.prompt_ids;
    for (const auto& lp : ev.prompt_logprobs) {
      response::LogprobEntry e{lp.id, lp.logprob, {}};
      for (const auto& t : lp.top) e.top.emplace_back(t.id, t.logprob);
      prompt_logprobs_[prompt].push_back(std::move(e));
    }
  }
  const bool final = ev.finish != FinishReason::kNone;
  response::ChatDelta delta;
  if (c.chat) {
    delta = c.chat->Push(ev.text);
    if (final) {
      response::ChatDelta rest = c.chat->Finish();
      delta.reasoning += rest.reasoning;
      delta.content += rest.content;
      for (auto& t : rest.tool_calls) delta.tool_calls.push_back(std::move(t));
    }
  }
  c.text += ev.text;
  // After a failure the reply is an error: no more chunks.
  if (request_.stream && !failed_ && !(final && ev.finish == FinishReason::kError)) {
    const bool want_logprobs = request_.sampling.logprobs && !lps.empty();
    const json logprobs = want_logprobs ? LogprobsJson(lps, c.text_offset) : json(nullptr);
    if (c.chat ? (!delta.empty() || want_logprobs) : (!ev.text.empty() || want_logprobs)) {
      StreamChunk(index, c.chat ? response::ChatDeltaJson(delta) : json(ev.text), logprobs, "");
    }
  }
  for (const auto& e : lps) {
    if (context_->tokenizer) c.text_offset += context_->tokenizer->TokenBytes(e.id).size();
  }
  if (!final) return;
  c.finish = FinishReasonName(ev.finish);
  if (c.chat) c.finish = c.chat->FinishReason(c.finish);
  prompt_tokens_[prompt] = ev.prompt_tokens;
  if (ev.finish == FinishReason::kError && !failed_) {
    failed_ = true;
    error_ = ev.error;
    // The reply is an error now: the other prompts' completions need not run on.
    if (streams_.size() > 1) AbortStreams();
  }
  context_->metrics->CountCompletion(ev.prompt_tokens, ev.completion_tokens, ev.ttft_s, ev.e2e_s);
  if (request_.stream && !failed_) {
    StreamChunk(index, c.chat ? json::object() : json(""), nullptr, c.finish);
  }
  if (--open_ == 0) Complete();
}

json GenerationCall::LogprobsJson(const std::vector<response::LogprobEntry>& entries,
                                  int64_t offset) const {
  if (!context_->tokenizer) return nullptr;
  return chat() ? response::ChatLogprobsJson(*context_->tokenizer, entries)
                : response::CompletionLogprobsJson(*context_->tokenizer, entries, offset);
}

json GenerationCall::PromptLogprobsJson(int prompt) const {
  json out = json::array();
  if (prompt_ids_[prompt].empty()) return out;
  out.push_back(nullptr);  // the first token has no logprob
  const int k = request_.sampling.prompt_logprobs;
  for (size_t t = 0; t < prompt_logprobs_[prompt].size(); ++t) {
    const response::LogprobEntry& e = prompt_logprobs_[prompt][t];
    auto entry = [&](int32_t id, float lp, json rank) {
      json j = {{"logprob", lp}, {"rank", std::move(rank)}};
      if (context_->tokenizer) j["decoded_token"] = context_->tokenizer->Decode({id}, false);
      return j;
    };
    json pos = json::object();
    json rank = nullptr;  // the prompt token's rank among the alternatives, when it is one
    for (size_t a = 0; a < e.top.size() && static_cast<int>(a) < k; ++a) {
      pos[std::to_string(e.top[a].first)] = entry(e.top[a].first, e.top[a].second, a + 1);
      if (e.top[a].first == e.id) rank = a + 1;
    }
    pos[std::to_string(e.id)] = entry(e.id, e.logprob, rank);
    out.push_back(std::move(pos));
  }
  return out;
}

json GenerationCall::EchoLogprobsJson(const Choice& c, int top) const {
  const std::vector<int32_t>& ids = prompt_ids_[c.prompt];
  std::vector<response::LogprobEntry> entries;
  if (!ids.empty()) entries.push_back({ids[0], 0, {}});
  for (response::LogprobEntry e : prompt_logprobs_[c.prompt]) {
    if (static_cast<int>(e.top.size()) > top) e.top.resize(static_cast<size_t>(top));
    entries.push_back(std::move(e));
  }
  entries.insert(entries.end(), c.logprobs.begin(), c.logprobs.end());
  json out = response::CompletionLogprobsJson(*context_->tokenizer, entries, 0);
  if (!ids.empty()) {  // the first token has no logprob (OpenAI's null)
    out["token_logprobs"][0] = nullptr;
    out["top_logprobs"][0] = nullptr;
  }
  return out;
}

void GenerationCall::StreamChunk(int index, const json& delta_or_text, const json& logprobs,
                                 const std::string& finish) {
  json choice = {{"index", index},
                 {"logprobs", logprobs},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  choice[chat() ? "delta" : "text"] = delta_or_text;
  json chunk = {{"id", response_id_},
                {"object", chat() ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", context_->model_name},
                {"choices", json::array({choice})}};
  if (request_.include_usage) chunk["usage"] = nullptr;
  exchange_->SendEvent(Dump(chunk));
}

json GenerationCall::Usage() const {
  int64_t completion = 0, reasoning = 0;
  for (const auto& c : choices_) {
    completion += static_cast<int64_t>(c.ids.size());
    reasoning += response::ReasoningTokens(c.ids, context_->think_end_id, request_.thinking);
  }
  int64_t prompt = 0;
  for (int64_t t : prompt_tokens_) prompt += t;
  return response::UsageJson(prompt, completion, chat() ? reasoning : -1);
}

void GenerationCall::Complete() {
  done_ = true;
  for (auto& stream : streams_) stream->SetNotify(nullptr);
  int status = 200;
  if (aborted_ && exchange_->closed()) {
    status = 499;  // the client closed the connection (nginx's convention)
    context_->metrics->CountAbort();
  } else if (failed_) {
    status = 500;
    const json err = response::ErrorBody(500, "generation failed: " + error_.message());
    if (request_.stream) {
      exchange_->SendEvent(Dump(err));
      exchange_->SendEvent("[DONE]");
      exchange_->EndEvents();
    } else {
      exchange_->Respond(500, "application/json", Dump(err), reply_headers_);
    }
  } else if (request_.stream) {
    if (request_.include_usage) {
      exchange_->SendEvent(Dump({{"id", response_id_},
                                 {"object", chat() ? "chat.completion.chunk" : "text_completion"},
                                 {"created", created_},
                                 {"model", context_->model_name},
                                 {"choices", json::array()},
                                 {"usage", Usage()}}));
    }
    exchange_->SendEvent("[DONE]");
    exchange_->EndEvents();
  } else {
    json out = {
        {"id", response_id_},       {"object", chat() ? "chat.completion" : "text_completion"},
        {"created", created_},      {"model", context_->model_name},
        {"choices", json::array()}, {"usage", Usage()}};
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      json ch = {{"index", i}, {"finish_reason", c.finish}};
      const bool want_logprobs = request_.sampling.logprobs;
      const std::string& echo = echo_texts_[c.prompt];
      ch["logprobs"] = want_logprobs ? LogprobsJson(c.logprobs, static_cast<int64_t>(echo.size()))
                                     : json(nullptr);
      if (want_logprobs && request_.echo && !c.chat && context_->tokenizer) {
        ch["logprobs"] = EchoLogprobsJson(c, request_.sampling.top_logprobs);
      }
      if (request_.sampling.prompt_logprobs >= 0)
        ch["prompt_logprobs"] = PromptLogprobsJson(c.prompt);
      if (c.chat) {
        ch["message"] = response::ChatMessageJson(*c.chat);
      } else {
        ch["text"] = echo + c.text;
      }
      out["choices"].push_back(std::move(ch));
    }
    exchange_->Respond(200, "application/json", Dump(out), reply_headers_);
  }
  context_->metrics->CountRequest(endpoint_, status);
  auto done = std::move(on_done_);
  if (done) done();
}

}  // namespace dsinfer::api
