#include "engine/engine_core.h"

#include <algorithm>
#include <random>

#include "base/check.h"
#include "engine/public_types.h"
#include "structured/tool_call_grammar.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsinfer::engine {

using scheduler::SeqId;

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineOptions& o,
                                                         std::unique_ptr<TextCodec> codec) {
  if (o.max_batch_tokens < 1 || o.max_running < 1 || o.max_model_len < 0 ||
      o.state_page_tokens < 1 || !(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1)) {
    return InvalidArgument(
        "engine options: max_batch_tokens and max_running must be >= 1, gpu_memory_utilization "
        "in (0, 1]");
  }
  std::unique_ptr<EngineCore> core(new EngineCore());
  const executor::Device wanted = o.device == Device::kCuda   ? executor::Device::kCuda
                                  : o.device == Device::kAuto ? executor::Device::kAuto
                                                              : executor::Device::kCpu;
  DSINFER_ASSIGN_OR_RETURN(const executor::Device device, executor::ResolveDevice(wanted));
  core->device_ = device;
  executor::RunnerOptions ro;
  ro.model_dir = o.model_dir;
  ro.random_preset = o.random_preset;
  ro.random_seed = o.random_seed;
  ro.cuda_graphs = !o.enforce_eager;
  ro.load_progress = o.load_progress;
  ro.device = device;
  ro.num_threads = o.num_threads;
  if (device == executor::Device::kCuda) {
    // The CUDA model's fixed state slots: one per running sequence, each of the context length.
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config cfg, executor::LoadRunnerConfig(ro));
    ro.max_len = std::min<int64_t>(o.max_model_len > 0 ? o.max_model_len : 4096,
                                   cfg.max_position_embeddings);
    ro.max_sequences = o.max_running;
    ro.max_tokens = o.max_batch_tokens;
  }
  DSINFER_ASSIGN_OR_RETURN(core->runner_, executor::CreateModelRunner(ro));
  if (codec) {
    core->codec_ = std::move(codec);
  } else if (!o.random_preset.empty()) {
    core->codec_ = NoTextCodec();  // a preset has no tokenizer: token ids only
  } else {
    DSINFER_ASSIGN_OR_RETURN(core->codec_, LoadTextCodec(o.model_dir, o.tokenizer_path));
  }
  const auto& config = core->runner_->config();
  core->max_model_len_ = config.max_position_embeddings;
  if (o.max_model_len > 0) core->max_model_len_ = std::min(core->max_model_len_, o.max_model_len);
  if (device == executor::Device::kCuda) {
    core->max_model_len_ = std::min(core->max_model_len_, ro.max_len);
  }

  const auto& layout = core->runner_->state_layout();
  cache::PlanOptions plan_options;
  plan_options.budget_bytes = o.state_memory_bytes > 0
                                  ? o.state_memory_bytes
                                  : core->runner_->StateMemoryBudget(o.gpu_memory_utilization);
  if (plan_options.budget_bytes < 1) {
    return ResourceExhausted("the model leaves no memory for request state on the GPU (at " +
                             std::to_string(o.gpu_memory_utilization) +
                             " gpu memory utilization); raise it or use a smaller model");
  }
  plan_options.max_sequences = o.max_running;
  plan_options.typical_length = std::min(o.typical_length, core->max_model_len_);
  plan_options.page_tokens = o.state_page_tokens;
  DSINFER_ASSIGN_OR_RETURN(auto plan, cache::PlanMemory(layout, plan_options));
  core->cache_ = std::make_unique<cache::StateCache>(std::move(plan));
  DSINFER_RETURN_IF_ERROR(core->runner_->BindCache(core->cache_.get()));
  int64_t lo = 0, hi = core->max_model_len_;  // largest length that fits alone
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (core->cache_->FitsAlone(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  core->max_fit_len_ = lo;
  if (const tokenizer::Tokenizer* tok = core->codec_->tokenizer()) {
    core->think_end_id_ = tok->TokenToId("</think>").value_or(-1);
  }

  scheduler::SchedulerConfig sc;
  sc.max_batch_tokens = o.max_batch_tokens;
  sc.max_running = std::min(o.max_running, core->cache_->plan().max_sequences);
  core->scheduler_ = std::make_unique<scheduler::Scheduler>(sc, core->cache_.get());
  return core;
}

StatusOr<PreparedRequest> EngineCore::Prepare(const GenerateRequest& request) const {
  PreparedRequest p;
  p.arrival = Clock::now();
  p.params = ToSamplerParams(request.params);
  p.priority = request.priority;
  DSINFER_RETURN_IF_ERROR(p.params.Validate());
  DSINFER_RETURN_IF_ERROR(p.params.ValidateForVocab(vocab_size()));
  const int sources = !request.prompt.empty() + !request.prompt_ids.empty() + !request.messages.empty();
  if (sources != 1) {
    return InvalidArgument("a request needs exactly one of prompt, prompt_ids and messages");
  }
  if (!request.prompt_ids.empty()) {
    for (int32_t id : request.prompt_ids) {
      if (id < 0 || id >= vocab_size()) {
        return InvalidArgument("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(vocab_size()) + ")");
      }
    }
    p.prompt = request.prompt_ids;
  } else if (!request.prompt.empty()) {
    if (const size_t bad = tokenizer::FindInvalidUtf8(request.prompt); bad != std::string::npos) {
      return InvalidArgument("the prompt is not valid UTF-8 (first bad byte at offset " +
                             std::to_string(bad) + ")");
    }
    DSINFER_ASSIGN_OR_RETURN(p.prompt, codec_->Encode(request.prompt));
  } else {
    DSINFER_ASSIGN_OR_RETURN(p.prompt, codec_->RenderChat(request.messages, request.chat));
  }
  if (p.prompt.empty()) return InvalidArgument("the prompt encodes to no tokens");
  for (size_t i = 0; i < p.params.stop.size(); ++i) {
    if (const size_t bad = tokenizer::FindInvalidUtf8(p.params.stop[i]); bad != std::string::npos) {
      return InvalidArgument("stop string " + std::to_string(i) +
                             " is not valid UTF-8 (first bad byte at offset " +
                             std::to_string(bad) + ")");
    }
  }
  if (!p.params.stop.empty() && !codec_->has_text()) {
    return InvalidArgument("stop strings need a tokenizer, and this model has none; use stop_token_ids");
  }
  const int64_t n = static_cast<int64_t>(p.prompt.size());
  if (n >= max_model_len_) {
    return OutOfRange("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                      std::to_string(max_model_len_) + " (prompt plus at least one generated token)");
  }
  if (n >= max_fit_len_) {
    return ResourceExhausted("the prompt has " + std::to_string(n) + " tokens; the state memory budget " +
                             "holds at most " + std::to_string(max_fit_len_) + " tokens per request");
  }
  if (!request.max_tokens_up_to_context && n + p.params.max_tokens > max_model_len_) {
    return OutOfRange("the context holds " + std::to_string(max_model_len_) + " tokens, but " +
                      std::to_string(n + p.params.max_tokens) + " were requested (" +
                      std::to_string(n) + " in the prompt, max_tokens " +
                      std::to_string(p.params.max_tokens) + "); lower max_tokens to at most " +
                      std::to_string(max_model_len_ - n));
  }
  if (p.params.structured_outputs.active()) {
    // A forced tool call writes the DSML tags of the model's dialect (V4.1 spells them apart).
    const recipe::DsmlNames dsml = recipe::DsmlNamesOf(codec_->dialect());
    p.params.structured_outputs = structured::WithDsmlNames(
        std::move(p.params.structured_outputs), dsml.calls, dsml.invoke, dsml.parameter);
    DSINFER_ASSIGN_OR_RETURN(p.constraint, Constraint(p.params.structured_outputs));
    p.constraint_after_reasoning =
        !request.messages.empty() && request.chat.thinking && think_end_id_ >= 0;
  }
  p.max_new_tokens = std::min<int64_t>({p.params.max_tokens, max_model_len_ - n, max_fit_len_ - n});
  p.seed = p.params.seed ? *p.params.seed : (uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  return p;
}

StatusOr<std::shared_ptr<structured::TokenAutomaton>> EngineCore::Constraint(
    const structured::ConstraintSpec& spec) const {
  const tokenizer::Tokenizer* tok = codec_->tokenizer();
  if (!tok) {
    return InvalidArgument(std::string("structured output (") +
                           structured::ConstraintKindName(spec.kind) +
                           ") needs a tokenizer, and this model has none");
  }
  std::call_once(constraints_once_, [&] {
    const auto eos = static_cast<int32_t>(runner_->config().eos_token_id);
    constraints_ = std::make_unique<structured::ConstraintCache>(
        structured::Vocabulary::FromTokenizer(*tok, vocab_size(), eos));
  });
  return constraints_->Get(spec);
}

void EngineCore::Add(uint64_t id, PreparedRequest request) {
  DSINFER_CHECK(id != 0 && !requests_.count(id));
  RequestState& r = requests_[id];
  r.id = id;
  r.req = std::move(request);
  r.completions.resize(static_cast<size_t>(r.req.params.n));
  for (int i = 0; i < r.req.params.n; ++i) {
    CompletionState& c = r.completions[i];
    c.index = i;
    c.history = sampler::TokenHistory(r.req.prompt);
    c.decoder = codec_->NewDecoder();
    c.stops = tokenizer::StopStringMatcher(r.req.params.stop);
    if (r.req.constraint) {
      c.matcher = std::make_unique<structured::Matcher>(r.req.constraint);
      c.matcher_active = !r.req.constraint_after_reasoning;
    }
  }
  r.open = r.req.params.n;
  r.completions[0].started = true;
  scheduler_->Add(SeqOf(id, 0), r.req.prompt, r.req.priority);
  ++stats_.requests_submitted;
  stats_.prompt_tokens += static_cast<int64_t>(r.req.prompt.size());
}

void EngineCore::Finish(RequestState& r, CompletionState& c, FinishReason reason, StreamEvent* ev) {
  c.finished = true;
  --r.open;
  if (c.started) {
    scheduler_->Remove(SeqOf(r.id, c.index));
    runner_->Release(SeqOf(r.id, c.index));
  }
  const Clock::time_point now = Clock::now();
  ev->finish = reason;
  ev->prompt_tokens = static_cast<int64_t>(r.req.prompt.size());
  ev->completion_tokens = c.generated;
  ev->e2e_s = std::chrono::duration<double>(now - r.req.arrival).count();
  ev->ttft_s = c.generated ? std::chrono::duration<double>(c.first_token - r.req.arrival).count() : 0;
}

void EngineCore::Abort(uint64_t id, std::vector<StreamEvent>* events) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestState& r = it->second;
  for (auto& c : r.completions) {
    if (c.finished) continue;
    StreamEvent ev;
    ev.request_id = id;
    ev.index = c.index;
    Finish(r, c, FinishReason::kAbort, &ev);
    events->push_back(std::move(ev));
  }
  requests_.erase(it);
  ++stats_.requests_finished;
}

void EngineCore::FailBatch(const scheduler::BatchPlan& plan, const Status& status,
                           std::vector<StreamEvent>* events) {
  for (const auto& ch : plan.chunks) {
    auto it = requests_.find(ch.id >> 8);
    if (it == requests_.end()) continue;
    RequestState& r = it->second;
    for (auto& c : r.completions) {
      if (c.finished) continue;
      StreamEvent ev;
      ev.request_id = r.id;
      ev.index = c.index;
      ev.error = status;
      Finish(r, c, FinishReason::kError, &ev);
      events->push_back(std::move(ev));
    }
    requests_.erase(it);
    ++stats_.requests_finished;
  }
}

StatusOr<executor::RunOutput> EngineCore::Forward(
    const scheduler::BatchPlan& plan, const std::vector<DrawJob>& jobs,
    const std::vector<std::shared_ptr<const structured::TokenMask>>& masks) {
  std::vector<executor::RunChunk> chunks;
  chunks.reserve(plan.chunks.size());
  for (const auto& ch : plan.chunks) {
    const auto& tokens = scheduler_->tokens(ch.id);
    chunks.push_back(
        {ch.id, ch.start,
         std::vector<int32_t>(tokens.begin() + ch.start, tokens.begin() + ch.start + ch.count)});
  }
  std::vector<executor::RunDraw> draws(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const DrawJob& j = jobs[i];
    const RequestState& r = *j.request;
    sampler::SampleInput& in = draws[i].input;
    draws[i].chunk = j.chunk;
    in.params = &r.req.params;
    in.history = &r.completions[j.index].history;
    in.seed = r.req.seed;
    in.sample_index = static_cast<uint32_t>(j.index);
    in.position = j.position;
    in.eos_id = static_cast<int32_t>(runner_->config().eos_token_id);
    in.allowed = masks[i] ? masks[i]->data() : nullptr;
  }
  stats_.forward_tokens += plan.num_tokens;
  const bool decode = std::all_of(plan.chunks.begin(), plan.chunks.end(),
                                  [](const auto& ch) { return ch.count == 1 && ch.start > 0; });
  const Clock::time_point t0 = Clock::now();
  auto out = runner_->Run(chunks, draws);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stats_.run_s += seconds;
  if (decode) {
    ++stats_.decode_steps;
    stats_.decode_rows += static_cast<int64_t>(plan.chunks.size());
    for (const auto& ch : plan.chunks) stats_.decode_context += ch.start + 1;
    stats_.decode_run_s += seconds;
  }
  return out;
}

std::vector<std::shared_ptr<const structured::TokenMask>> EngineCore::ComputeMasks(
    const std::vector<DrawJob>& jobs) {
  std::vector<std::shared_ptr<const structured::TokenMask>> masks(jobs.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const CompletionState& c = jobs[i].request->completions[jobs[i].index];
    if (c.matcher && c.matcher_active) todo.push_back(i);
  }
  if (todo.empty()) return masks;
  if (!mask_pool_) mask_pool_ = std::make_unique<ThreadPool>(2);
  mask_pool_->ParallelFor(static_cast<int64_t>(todo.size()), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const DrawJob& j = jobs[todo[k]];
      masks[todo[k]] = j.request->completions[j.index].matcher->Mask();
    }
  });
  return masks;
}

void EngineCore::Step(std::vector<StreamEvent>* events) {
  scheduler::BatchPlan plan = scheduler_->Schedule();
  ++stats_.steps;
  for (SeqId id : plan.preempted) runner_->Release(id);
  if (plan.empty()) return;
  // Draws: one token per chunk that reaches its sequence's end; siblings of a first sample too.
  std::vector<DrawJob> jobs;
  for (size_t row = 0; row < plan.chunks.size(); ++row) {
    const auto& ch = plan.chunks[row];
    if (!ch.samples) continue;
    RequestState& r = requests_.at(ch.id >> 8);
    const int index = static_cast<int>(ch.id & 0xff);
    const int64_t position = ch.start + ch.count;
    const int chunk = static_cast<int>(row);
    jobs.push_back({&r, index, chunk, position, true});
    if (index == 0 && !r.forked) {
      for (int i = 1; i < r.req.params.n; ++i) jobs.push_back({&r, i, chunk, position, false});
    }
  }
  const auto masks = ComputeMasks(jobs);
  auto out = Forward(plan, jobs, masks);
  if (!out.ok()) {
    FailBatch(plan, Internal("forward failed: " + out.status().ToString()), events);
    return;
  }
  std::vector<int32_t> next;
  std::vector<Drawn> drawn;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const DrawJob& j = jobs[i];
    drawn.push_back({j.request->id, j.index, std::move(out->tokens[i])});
    if (j.own) next.push_back(drawn.back().token.id);
  }
  scheduler_->Commit(plan, next);
  // Fork the siblings from completion 0's state (the prompt, computed once).
  for (const auto& d : drawn) {
    RequestState& r = requests_.at(d.request);
    if (d.index == 0 || r.forked) continue;
    const SeqId parent = SeqOf(r.id, 0), child = SeqOf(r.id, d.index);
    const int64_t prefix = static_cast<int64_t>(r.req.prompt.size());
    if (scheduler_->Fork(parent, child, prefix, d.token.id)) runner_->Fork(parent, child);
    r.completions[d.index].started = true;
  }
  for (const auto& d : drawn) requests_.at(d.request).forked = true;
  for (const auto& d : drawn) Emit(d, events);
}

void EngineCore::Emit(const Drawn& d, std::vector<StreamEvent>* events) {
  auto it = requests_.find(d.request);
  if (it == requests_.end()) return;
  RequestState& r = it->second;
  CompletionState& c = r.completions[d.index];
  const sampler::SamplingParams& p = r.req.params;
  const int32_t id = d.token.id;
  c.history.AddOutput(id);
  if (c.generated++ == 0) c.first_token = Clock::now();
  ++stats_.generated_tokens;
  Status constraint_status;
  if (c.matcher && c.matcher_active) {
    constraint_status = c.matcher->Advance(id);
  } else if (c.matcher && id == think_end_id_) {
    c.matcher_active = true;  // the reasoning ended: the answer is constrained from here
  }

  StreamEvent ev;
  ev.request_id = r.id;
  ev.index = c.index;
  ev.ids = {id};
  if (p.logprobs || p.top_logprobs > 0)
    ev.logprobs.push_back({id, d.token.logprob, ToPublicLogprobs(d.token.top)});
  FinishReason finish = FinishReason::kNone;
  if (!constraint_status.ok()) {
    ev.error = constraint_status;
    finish = FinishReason::kError;
  }
  if (finish == FinishReason::kNone && c.decoder) {
    auto res = c.stops.Push(c.decoder->Add(id));
    ev.text = std::move(res.text);
    if (res.stopped) {
      finish = FinishReason::kStop;
      ev.stop = p.stop[static_cast<size_t>(res.stop_index)];
      if (p.include_stop_str_in_output) ev.text += ev.stop;
    }
  }
  if (finish == FinishReason::kNone) {
    const int64_t length = static_cast<int64_t>(r.req.prompt.size()) + c.generated;
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end()) {
      finish = FinishReason::kStop;
      ev.stop = "id:" + std::to_string(id);
    } else if (c.matcher && c.matcher_active && c.matcher->IsCompleted()) {
      finish =
          FinishReason::kStop;  // the constraint is complete (EOS included): nothing may follow
    } else if (id == runner_->config().eos_token_id && !p.ignore_eos) {
      finish = FinishReason::kStop;
    } else if (c.generated >= r.req.max_new_tokens || length >= max_model_len_) {
      finish = FinishReason::kLength;
    }
    if (finish != FinishReason::kNone && c.decoder) {
      auto res = c.stops.Push(c.decoder->Finish());
      ev.text += res.text;
      ev.text += c.stops.Finish();
    }
  }
  if (finish != FinishReason::kNone) Finish(r, c, finish, &ev);
  events->push_back(std::move(ev));
  if (r.open == 0) {
    requests_.erase(it);
    ++stats_.requests_finished;
  }
}

EngineStats EngineCore::Stats() const {
  EngineStats s = stats_;
  const auto sched = scheduler_->Stats();
  s.requests_waiting = sched.waiting;
  s.requests_running = sched.running;
  s.preemptions = sched.preemptions;
  const auto cache = cache_->Stats();
  s.state_bytes_used = cache.bytes_used;
  s.state_bytes_total = cache.bytes_total;
  return s;
}

}  // namespace dsinfer::engine
