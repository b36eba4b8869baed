#include "engine/engine_core.h"

#include <algorithm>
#include <random>

#include "base/check.h"
#include "engine/public_types.h"
#include "io/model_config.h"
#include "structured/tool_call_grammar.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dsinfer::engine {

using scheduler::SeqId;

namespace {
// The most draft tokens of a verify chunk (the CUDA model's rollback slack).
constexpr int kMaxSpeculativeTokens = 16;
}  // namespace

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineOptions& o,
                                                         std::unique_ptr<TextCodec> codec) {
  if (o.max_batch_tokens < 0 || o.max_running < 1 || o.max_model_len < 0 ||
      o.state_page_tokens < 1 || !(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1)) {
    return InvalidArgument(
        "engine options: max_batch_tokens must be >= 0 (0: the device's default), max_running "
        ">= 1, gpu_memory_utilization in (0, 1]");
  }
  if (o.structured_mask_deadline_us < 0 || o.structured_mask_deadline_us > 10'000'000) {
    return InvalidArgument("structured_mask_deadline_us must be in [0, 10000000] (0: wait), got " +
                           std::to_string(o.structured_mask_deadline_us));
  }
  SpeculativeOptions spec = o.speculative;
  const bool speculate = spec.method != SpeculativeOptions::Method::kNone;
  if (spec.method == SpeculativeOptions::Method::kDSpark && spec.num_tokens == 0) {
    // DSpark's block: every draft it makes is worth verifying (its confidence head cuts them
    // with `adaptive`).
    executor::RunnerOptions ro;
    ro.model_dir = o.model_dir;
    ro.random_preset = o.random_preset;
    DSINFER_ASSIGN_OR_RETURN(const model::ModelInfo info, executor::LoadRunnerInfo(ro));
    if (info.draft_block_size == 0) {
      return InvalidArgument(
          "DSpark speculative decoding: the model has no DSpark draft layers "
          "(num_nextn_predict_layers is 0)");
    }
    spec.num_tokens = std::min(info.draft_block_size, kMaxSpeculativeTokens);
  }
  if (speculate && (spec.num_tokens < 1 || spec.num_tokens > kMaxSpeculativeTokens)) {
    return InvalidArgument("speculative decoding: num_speculative_tokens must be in [1, 16], got " +
                           std::to_string(spec.num_tokens));
  }
  if (speculate && spec.method == SpeculativeOptions::Method::kNgram &&
      (spec.ngram_min < 1 || spec.ngram_max < spec.ngram_min)) {
    return InvalidArgument("speculative decoding: n-gram sizes need 1 <= min <= max");
  }
  if (o.prefix_cache && (o.prefix_checkpoint_interval < cache::PrefixIndex::kBlock ||
                         o.prefix_checkpoint_interval % cache::PrefixIndex::kBlock != 0 ||
                         o.prefix_cache_entries < 0)) {
    return InvalidArgument(
        "prefix cache: the checkpoint interval must be a positive multiple of 128 "
        "tokens, got " +
        std::to_string(o.prefix_checkpoint_interval));
  }
  if (o.host_cache_bytes < 0 || (o.host_cache_bytes > 0 && !o.prefix_cache)) {
    return InvalidArgument(
        "the host cache tier needs the prefix cache, and its size must not be negative");
  }
  std::unique_ptr<EngineCore> core(new EngineCore());
  core->spec_ = spec;
  const executor::Device wanted = o.device == Device::kCuda   ? executor::Device::kCuda
                                  : o.device == Device::kAuto ? executor::Device::kAuto
                                                              : executor::Device::kCpu;
  executor::RunnerOptions ro;
  ro.model_dir = o.model_dir;
  ro.random_preset = o.random_preset;
  ro.random_seed = o.random_seed;
  ro.cuda_graphs = !o.enforce_eager;
  ro.engram_host_tables = o.engram_host_tables;
  DSINFER_ASSIGN_OR_RETURN(ro.kv_cache_dtype, io::ParseKvCacheDtype(o.kv_cache_dtype));
  ro.load_progress = o.load_progress;
  ro.num_threads = o.num_threads;
  ro.expert_parallel = o.expert_parallel;
  ro.eplb_redundant_experts = o.eplb_redundant_experts;
  ro.eplb_interval = o.eplb_interval;
  ro.max_draft_tokens = speculate ? spec.num_tokens : 0;
  ro.mtp = spec.method == SpeculativeOptions::Method::kMtp;
  ro.dspark = spec.method == SpeculativeOptions::Method::kDSpark;
  ro.all_logits = o.prompt_logprobs;
  // A draw that sits out a step (its grammar mask late) rolls its row's token back; a verify
  // chunk that sits out, its known token and its drafts (LimitDrafts keeps a constrained
  // completion's drafts within this slack, at most kMaxSpeculativeTokens).
  ro.max_rollback = o.structured_mask_deadline_us > 0
                        ? std::min(kMaxSpeculativeTokens, speculate ? spec.num_tokens + 1 : 1)
                        : 0;
  core->sit_out_slack_ = ro.max_rollback;
  ro.device = wanted;
  DSINFER_RETURN_IF_ERROR(executor::CheckExpertParallelDevice(ro));  // before a device is sought
  DSINFER_ASSIGN_OR_RETURN(const executor::Device device, executor::ResolveDevice(wanted));
  ro.device = device;
  core->device_ = device;
  core->max_batch_tokens_ = o.max_batch_tokens > 0              ? o.max_batch_tokens
                            : device == executor::Device::kCuda ? EngineOptions::kCudaBatchTokens
                                                                : EngineOptions::kCpuBatchTokens;
  core->prompt_logprobs_ = o.prompt_logprobs;
  core->share_pages_ = o.share_state_pages;
  core->mask_deadline_ = std::chrono::microseconds(o.structured_mask_deadline_us);
  core->overlap_ =
      !speculate &&
      (o.overlap == EngineOptions::Overlap::kOn ||
       (o.overlap == EngineOptions::Overlap::kAuto && device == executor::Device::kCuda));
  if (device == executor::Device::kCuda) {
    // The CUDA model's fixed state slots: one per running sequence, each of the context length.
    DSINFER_ASSIGN_OR_RETURN(const model::ModelInfo info, executor::LoadRunnerInfo(ro));
    ro.max_len = std::min<int64_t>(o.max_model_len > 0 ? o.max_model_len : 4096,
                                   info.max_position_embeddings);
    ro.max_sequences = o.max_running;
    ro.max_tokens = core->max_batch_tokens_;
  }
  DSINFER_ASSIGN_OR_RETURN(core->runner_, executor::CreateModelRunner(ro));
  if (ro.mtp && !core->runner_->has_mtp()) {
    return InvalidArgument("MTP speculative decoding: this model runner has no MTP drafter");
  }
  if (ro.dspark && !core->runner_->has_dspark()) {
    return InvalidArgument("DSpark speculative decoding: this model runner has no DSpark drafter");
  }
  if (codec) {
    core->codec_ = std::move(codec);
  } else if (!o.random_preset.empty() && o.tokenizer_path.empty()) {
    core->codec_ = NoTextCodec();  // a preset has no tokenizer unless given one: token ids only
  } else {
    DSINFER_ASSIGN_OR_RETURN(core->codec_, LoadTextCodec(o.model_dir, o.tokenizer_path));
  }
  core->max_model_len_ = core->runner_->info().max_position_embeddings;
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
  // The prefix cache's states hold ring pages too. By default they live in whatever the running
  // requests leave free (and give way to them); prefix_cache_entries > 0 plans rings for that many
  // states beside the running ones (a cache that survives a full batch, at the cost of list
  // memory).
  const int checkpoints =
      o.prefix_cache ? (o.prefix_cache_entries > 0 ? o.prefix_cache_entries : o.max_running) : 0;
  plan_options.max_sequences = o.max_running + (o.prefix_cache ? o.prefix_cache_entries : 0);
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
  sc.max_batch_tokens = core->max_batch_tokens_;
  sc.max_running = std::min(o.max_running, core->cache_->plan().max_sequences);
  if (o.prefix_cache) sc.checkpoint_interval = o.prefix_checkpoint_interval;
  core->scheduler_ = std::make_unique<scheduler::Scheduler>(sc, core->cache_.get());
  if (o.prefix_cache) {
    core->StartPrefixCache(o, static_cast<size_t>(checkpoints));
  }
  return core;
}

EngineCore::~EngineCore() {
  if (inflight_ && runner_) (void)runner_->Collect();
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
  for (int32_t refused : runner_->info().refused_ids) {
    if (std::find(p.prompt.begin(), p.prompt.end(), refused) != p.prompt.end()) {
      return InvalidArgument("image inputs are not supported: the prompt holds token id " +
                             std::to_string(refused) +
                             ", the image token, and this model's vision tower is not built");
    }
  }
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
  if (p.params.prompt_logprobs >= 0 && device_ == executor::Device::kCuda && !prompt_logprobs_) {
    return InvalidArgument(
        "prompt_logprobs needs the engine started with prompt logprobs enabled on the GPU "
        "(--enable-prompt-logprobs: logits kept for every row of a step)");
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
    if (spec_.method != SpeculativeOptions::Method::kNone) {
      c.draft_length = speculative::DraftLength(spec_.num_tokens, spec_.adaptive);
    }
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
  const SeqId seq = SeqOf(r.id, c.index);
  if (prefix_ && c.started && (reason == FinishReason::kStop || reason == FinishReason::kLength) &&
      scheduler_->Decoding(seq)) {
    KeepFinished(seq, scheduler_->computed(seq));  // a chat's next turn starts with this one
  }
  if (auto kept = kept_preempted_.find(seq); kept != kept_preempted_.end()) {
    // Its state kept at a preemption and still cached (it finished or was aborted before its
    // readmission restored it): nothing will restore it now.
    DropCached(kept->second);
    kept_preempted_.erase(kept);
  }
  if (c.started) {
    scheduler_->Remove(SeqOf(r.id, c.index));
    runner_->Release(SeqOf(r.id, c.index));
  }
  const Clock::time_point now = Clock::now();
  ev->finish = reason;
  ev->prompt_tokens = static_cast<int64_t>(r.req.prompt.size());
  ev->completion_tokens = c.generated;
  ev->draft_tokens = c.draft_tokens;
  ev->accepted_tokens = c.accepted_tokens;
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

EngineCore::CompletionState* EngineCore::Live(const DrawJob& job) {
  auto it = requests_.find(job.request);
  if (it == requests_.end()) return nullptr;
  CompletionState& c = it->second.completions[job.index];
  return c.finished ? nullptr : &c;
}

std::vector<EngineCore::DrawJob> EngineCore::PlanDraws(const scheduler::BatchPlan& plan) {
  std::vector<DrawJob> jobs;
  for (size_t row = 0; row < plan.chunks.size(); ++row) {
    const auto& ch = plan.chunks[row];
    if (!ch.samples) continue;
    const RequestState& r = requests_.at(ch.id >> 8);
    const int index = static_cast<int>(ch.id & 0xff);
    const int chunk = static_cast<int>(row);
    for (int64_t j = 0; j <= ch.drafts; ++j) {
      const int64_t at = ch.count - 1 - ch.drafts + j;  // the row within the chunk
      jobs.push_back({r.id, index, chunk, ch.start + at + 1, true,
                      ch.drafts > 0 ? static_cast<int>(at) : -1, static_cast<int>(j)});
    }
    if (index == 0 && !r.forked) {
      const int64_t position = ch.start + ch.count;
      for (int i = 1; i < r.req.params.n; ++i) jobs.push_back({r.id, i, chunk, position, false});
    }
  }
  // prompt_logprobs: row j of completion 0's prompt chunk scores prompt token start + j + 1. Last
  // in the list, apart from the draws (no masks, no pending tokens).
  for (size_t row = 0; row < plan.chunks.size(); ++row) {
    const auto& ch = plan.chunks[row];
    if ((ch.id & 0xff) != 0) continue;
    RequestState& r = requests_.at(ch.id >> 8);
    if (r.req.params.prompt_logprobs < 0) continue;
    const auto n = static_cast<int64_t>(r.req.prompt.size());
    for (int64_t t = std::max(ch.start + 1, r.scored + 1); t < std::min(ch.start + ch.count + 1, n);
         ++t) {
      DrawJob j{r.id, 0, static_cast<int>(row), t, false, static_cast<int>(t - 1 - ch.start)};
      j.forced = r.req.prompt[static_cast<size_t>(t)];
      jobs.push_back(j);
      r.scored = t;
    }
  }
  return jobs;
}

Status EngineCore::Launch(const scheduler::BatchPlan& plan, const std::vector<DrawJob>& jobs) {
  // The in-flight step's draws whose tokens are still pending: sequence -> draw.
  std::unordered_map<SeqId, int> feeds;
  if (inflight_) {
    for (size_t i = 0; i < inflight_->jobs.size(); ++i) {
      const DrawJob& j = inflight_->jobs[i];
      if (j.forced < 0 && (!j.own || inflight_->plan.chunks[j.chunk].drafts == 0))
        feeds[SeqOf(j.request, j.index)] = static_cast<int>(i);
    }
  }
  std::vector<executor::RunChunk> chunks;
  chunks.reserve(plan.chunks.size());
  for (const auto& ch : plan.chunks) {
    const auto& tokens = scheduler_->tokens(ch.id);
    const int64_t known = ch.count - ch.drafts;
    executor::RunChunk run{
        ch.id, ch.start,
        std::vector<int32_t>(tokens.begin() + ch.start, tokens.begin() + ch.start + known)};
    if (run.tokens.back() == scheduler::kPendingToken) {
      auto it = feeds.find(ch.id);
      DSINFER_CHECK(it != feeds.end());  // only the token the in-flight step draws is pending
      run.feed = it->second;
    }
    DSINFER_CHECK(std::find(run.tokens.begin(), run.tokens.end() - 1, scheduler::kPendingToken) ==
                  run.tokens.end() - 1);
    if (ch.drafts > 0) {
      const auto& drafts = scheduler_->drafts(ch.id);
      run.tokens.insert(run.tokens.end(), drafts.begin(), drafts.begin() + ch.drafts);
    }
    chunks.push_back(std::move(run));
  }
  std::vector<executor::RunDraw> shape(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    shape[i].chunk = jobs[i].chunk;
    shape[i].row = jobs[i].row;
  }
  stats_.forward_tokens += plan.num_tokens;
  return runner_->Launch(chunks, executor::DrawTails(chunks, shape));
}

void EngineCore::CommitLaunched(const scheduler::BatchPlan& plan,
                                const std::vector<DrawJob>& jobs) {
  scheduler::BatchPlan plain;
  std::vector<int32_t> pending;
  for (const auto& ch : plan.chunks) {
    if (ch.drafts > 0) continue;  // verify chunks commit what Complete accepts
    plain.chunks.push_back(ch);
    if (ch.samples) pending.push_back(scheduler::kPendingToken);
  }
  scheduler_->Commit(plain, pending);
  // Fork the siblings from completion 0's state (the prompt, computed once).
  for (const DrawJob& j : jobs) {
    RequestState& r = requests_.at(j.request);
    if (j.own || j.forced >= 0) continue;
    const SeqId parent = SeqOf(r.id, 0), child = SeqOf(r.id, j.index);
    const int64_t prefix = static_cast<int64_t>(r.req.prompt.size());
    if (scheduler_->Fork(parent, child, prefix, scheduler::kPendingToken,
                         share_pages_ ? runner_->ShareableLength(parent, prefix) : 0))
      runner_->Fork(parent, child);
    r.completions[j.index].started = true;
  }
  for (const DrawJob& j : jobs) {
    if (j.forced < 0) requests_.at(j.request).forked = true;  // it drew: siblings forked now
  }
  if (!overlap_) return;
  // A draw that is certain to finish its completion (its token limit or the context) holds the
  // sequence: the next schedule, which comes before this step is collected, leaves it out instead
  // of computing a token that would be dropped (and reserving memory for it).
  std::unordered_set<SeqId> in_flight;  // completions with a draw of the step not yet collected
  if (inflight_) {
    for (const DrawJob& f : inflight_->jobs) {
      if (f.forced < 0) in_flight.insert(SeqOf(f.request, f.index));
    }
  }
  for (const DrawJob& j : jobs) {
    if (j.forced >= 0 || plan.chunks[j.chunk].drafts > 0) continue;
    const RequestState& r = requests_.at(j.request);
    // Without drafts (overlap excludes speculation) a completion draws at most once a step.
    const int64_t generated =
        r.completions[j.index].generated + (in_flight.count(SeqOf(j.request, j.index)) ? 1 : 0) + 1;
    if (generated >= r.req.max_new_tokens ||
        static_cast<int64_t>(r.req.prompt.size()) + generated >= max_model_len_) {
      scheduler_->Hold(SeqOf(j.request, j.index));
    }
  }
}

void EngineCore::SampleLaunched(scheduler::BatchPlan plan, std::vector<DrawJob> jobs,
                                Clock::time_point launched, std::vector<StreamEvent>* events) {
  // With overlap, the previous step's emit may have finished some of these completions: their
  // tokens would be dropped anyway, so they are not drawn.
  std::vector<DrawJob> live;
  live.reserve(jobs.size());
  for (const DrawJob& j : jobs) {
    if (Live(j)) live.push_back(j);
  }
  // Masks: those not started before the launch start now (with overlap, the previous step's
  // tokens were emitted just now). A draw whose mask is late sits out the step.
  const std::vector<MaskGroup> groups = StartMasks(live, /*known_only=*/false);
  WaitForMasks(groups);
  std::vector<const structured::TokenMask*> masks(live.size(), nullptr);
  std::vector<char> drops(live.size(), 0);
  for (const MaskGroup& g : groups) {
    CompletionState* c = Live(live[g.first]);
    if (!c) continue;  // finished by an earlier group's catch-up (dropped below)
    if (!g.masks->done()) {
      // A verify chunk draws at the rows whose masks are ready (read once: the worker may add
      // more meanwhile), the first r: it verifies r - 1 drafts, as if it had drafted no more, so
      // the tokens stay those without speculation. With none ready it sits out like a plain draw.
      const size_t rows =
          g.masks->num_behind() > 0 ? 0 : static_cast<size_t>(g.masks->rows_ready());
      if (rows < g.last - g.first) ++stats_.structured_mask_late;  // (else: done meanwhile)
      if (rows == 0) {
        if (g.last - g.first == 1) {
          SitOut(live[g.first]);
        } else {
          SitOutVerify(live[g.first], plan.chunks[live[g.first].chunk]);
        }
        for (size_t k = g.first; k < g.last; ++k) drops[k] = 1;
        continue;
      }
      for (size_t k = g.first; k < g.last; ++k) {
        if (k - g.first < rows) {
          masks[k] = g.masks->masks()[k - g.first].get();
        } else {
          drops[k] = 1;
        }
      }
      g.masks->Cancel();  // the rest are not needed
      if (c->mask_job == g.masks) c->mask_job.reset();
      continue;
    }
    // Tokens emitted while the automaton was busy: the job applied them; the constraint may
    // have ended there, and then the completion's draw is not made.
    if (g.masks->num_behind() > 0 &&
        !CatchUp(requests_.at(live[g.first].request), *c, *g.masks, events)) {
      continue;
    }
    for (size_t k = g.first; k < g.last; ++k) masks[k] = g.masks->masks()[k - g.first].get();
    if (c->mask_job == g.masks) c->mask_job.reset();  // used (the group keeps it for the call)
  }
  size_t kept = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    if (drops[i] || !Live(live[i])) continue;
    live[kept] = live[i];
    masks[kept++] = masks[i];
  }
  live.resize(kept);
  std::vector<executor::RunDraw> draws(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    const DrawJob& j = live[i];
    const RequestState& r = requests_.at(j.request);
    sampler::SampleInput& in = draws[i].input;
    draws[i].chunk = j.chunk;
    draws[i].row = j.row;
    if (j.pending > 0) {
      in.pending = scheduler_->drafts(plan.chunks[j.chunk].id).data();
      in.num_pending = j.pending;
    }
    in.params = &r.req.params;
    in.history = &r.completions[j.index].history;
    in.seed = r.req.seed;
    in.sample_index = static_cast<uint32_t>(j.index);
    in.position = j.position;
    in.eos_id = static_cast<int32_t>(runner_->info().eos_token_id);
    in.refused = &runner_->info().refused_ids;
    in.allowed = masks[i] ? masks[i]->data() : nullptr;
    in.forced = j.forced;
    in.forced_top = std::max(0, r.req.params.prompt_logprobs);
  }
  Launched step;
  // Decode steps: one known token per sequence (with or without drafts).
  step.decode = std::all_of(plan.chunks.begin(), plan.chunks.end(), [](const auto& ch) {
    return ch.count - ch.drafts == 1 && ch.start > 0;
  });
  step.launched = launched;
  if (const Status sampled = runner_->Sample(draws); !sampled.ok()) {
    FailBatch(plan, Internal("sampling failed: " + sampled.ToString()), events);
    return;
  }
  step.plan = std::move(plan);
  step.jobs = std::move(live);
  inflight_ = std::move(step);
}

void EngineCore::Step(std::vector<StreamEvent>* events) {
  const Clock::time_point start = Clock::now();
  // Drafts need every earlier token: speculation runs serially (overlap_ is off with it).
  if (spec_.method != SpeculativeOptions::Method::kNone) ProposeDrafts();
  scheduler::BatchPlan plan = scheduler_->Schedule();
  probed_ = 0;  // a probe the schedule did not restore holds nothing past it
  ++stats_.steps;
  for (SeqId id : plan.preempted) {
    runner_->Release(id);
    auto it = requests_.find(id >> 8);
    if (it != requests_.end()) it->second.completions[id & 0xff].model_drafts.clear();
  }
  if (plan.empty()) {
    if (inflight_) Complete(events);
  } else {
    std::vector<DrawJob> jobs = PlanDraws(plan);
    // The masks of the draws whose earlier tokens are all known (every one without overlap)
    // compute while the forward runs.
    StartMasks(jobs, /*known_only=*/true);
    const Clock::time_point launched = Clock::now();
    if (const Status status = Launch(plan, jobs); !status.ok()) {
      if (inflight_) Complete(events);
      FailBatch(plan, Internal("forward failed: " + status.ToString()), events);
    } else {
      CommitLaunched(plan, jobs);
      // While the device runs this step: the previous one's tokens (overlap).
      if (inflight_) Complete(events);
      if (prefix_) CheckpointStep(plan, /*verified=*/false);
      SampleLaunched(std::move(plan), std::move(jobs), launched, events);
      if (!overlap_ && inflight_) Complete(events);
    }
  }
  // State memory at its peak (after the step's reservations, forks and checkpoints).
  const cache::CacheStats cache = cache_->Stats();
  stats_.state_bytes_peak = std::max(stats_.state_bytes_peak, cache.bytes_used);
  stats_.state_bytes_shared_peak =
      std::max(stats_.state_bytes_shared_peak, cache.bytes_referenced - cache.bytes_used);
  stats_.step_s += std::chrono::duration<double>(Clock::now() - start).count();
}

void EngineCore::Complete(std::vector<StreamEvent>* events) {
  Launched f = std::move(*inflight_);
  inflight_.reset();
  const Clock::time_point t0 = Clock::now();
  auto out = runner_->Collect();
  const Clock::time_point t1 = Clock::now();
  stats_.wait_s += std::chrono::duration<double>(t1 - t0).count();
  const double seconds = std::chrono::duration<double>(t1 - f.launched).count();
  stats_.run_s += seconds;
  if (spec_.adaptive && spec_.method != SpeculativeOptions::Method::kNone) {
    spec_cost_.ObserveStep(f.plan.num_tokens, seconds);
    spec_batch_ = std::max<int64_t>(1, static_cast<int64_t>(f.plan.chunks.size()));
  }
  if (f.decode) {
    ++stats_.decode_steps;
    stats_.decode_rows += static_cast<int64_t>(f.plan.chunks.size());
    for (const auto& ch : f.plan.chunks) stats_.decode_context += ch.start + 1;
    stats_.decode_run_s += seconds;
  }
  if (!out.ok()) {
    FailBatch(f.plan, Internal("forward failed: " + out.status().ToString()), events);
    return;
  }
  DSINFER_CHECK(out->tokens.size() == f.jobs.size());
  // Tokens committed as pending at the launch are filled in. A verify chunk keeps its drafts up
  // to the first one that differs from the token drawn before it, and every drawn token up to
  // there; the rest is rolled back.
  scheduler::BatchPlan verified;
  std::vector<int32_t> next;
  std::vector<int64_t> accepted;
  std::vector<Drawn> drawn;
  for (size_t i = 0; i < f.jobs.size();) {
    const DrawJob& j = f.jobs[i];
    const auto& ch = f.plan.chunks[j.chunk];
    if (j.forced >= 0) {  // a prompt token's score
      auto it = requests_.find(j.request);
      if (it != requests_.end()) {
        RequestState& r = it->second;
        r.prompt_logprobs.resize(r.req.prompt.size() - 1);
        const sampler::SampledToken& tok = out->tokens[i];
        r.prompt_logprobs[static_cast<size_t>(j.position - 1)] = {tok.id, tok.logprob,
                                                                  ToPublicLogprobs(tok.top)};
      }
      ++i;
      continue;
    }
    if (!j.own || ch.drafts == 0) {
      if (j.own && spec_.method != SpeculativeOptions::Method::kNone) {
        if (auto it = requests_.find(j.request); it != requests_.end())
          it->second.completions[j.index].draft_length.Skipped();
      }
      scheduler_->SetToken(SeqOf(j.request, j.index), j.position, out->tokens[i].id);
      drawn.push_back({j.request, j.index, std::move(out->tokens[i])});
      ++i;
      continue;
    }
    // Speculation is serial: nothing finished between the launch and now, so the chunk's draws
    // are here: drafts + 1, or fewer when the later rows' grammar masks were late (then the
    // drafts past the last drawn row count as rejected: the chunk verified `tried` of them).
    size_t rows = 1;
    while (i + rows < f.jobs.size() && f.jobs[i + rows].chunk == j.chunk && f.jobs[i + rows].own &&
           f.jobs[i + rows].forced < 0)
      ++rows;
    DSINFER_CHECK(rows <= static_cast<size_t>(ch.drafts) + 1);
    const int64_t tried = static_cast<int64_t>(rows) - 1;
    const auto& drafts = scheduler_->drafts(ch.id);
    int64_t m = 0;
    while (m < tried && out->tokens[i + m].id == drafts[m]) ++m;
    for (int64_t t = 0; t <= m; ++t)
      drawn.push_back({j.request, j.index, std::move(out->tokens[i + t])});
    verified.chunks.push_back(ch);
    next.push_back(drawn.back().token.id);
    accepted.push_back(m);
    CompletionState& c = requests_.at(j.request).completions[j.index];
    c.draft_tokens += tried;
    c.accepted_tokens += m;
    if (tried > 0) {
      c.draft_length.Observe(static_cast<int>(tried), static_cast<int>(m));
    } else {
      c.draft_length.Skipped();
    }
    ++stats_.spec_verify_rows;
    stats_.spec_draft_tokens += tried;
    stats_.spec_accepted_tokens += m;
    if (m < ch.drafts) {
      const Status rolled = runner_->Rollback(ch.id, ch.start + ch.count - (ch.drafts - m));
      DSINFER_CHECK(rolled.ok());  // within the slack the runner was created with
    }
    i += rows;
  }
  if (!verified.empty()) {
    scheduler_->Commit(verified, next, accepted);
    if (prefix_) CheckpointStep(verified, /*verified=*/true);
  }
  for (const auto& d : drawn) Emit(d, events);
  if (spec_.method == SpeculativeOptions::Method::kMtp ||
      spec_.method == SpeculativeOptions::Method::kDSpark) {
    DraftWithModel(drawn);
  }
}

void EngineCore::Emit(const Drawn& d, std::vector<StreamEvent>* events) {
  auto it = requests_.find(d.request);
  if (it == requests_.end()) return;
  RequestState& r = it->second;
  CompletionState& c = r.completions[d.index];
  if (c.finished) return;  // tokens drawn after its last one (a verify chunk's) are dropped
  const sampler::SamplingParams& p = r.req.params;
  const int32_t id = d.token.id;
  // Something besides the constraint could end the completion at this token.
  const int64_t length = static_cast<int64_t>(r.req.prompt.size()) + c.generated + 1;
  const bool other_finish =
      !p.stop.empty() ||
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end() ||
      (id == runner_->info().eos_token_id && !p.ignore_eos) ||
      c.generated + 1 >= r.req.max_new_tokens || length >= max_model_len_;
  if (c.matcher && c.matcher_active && other_finish && !c.behind.empty()) {
    // The tokens left behind first (see below; this waits for the automaton): the constraint may
    // have ended at one of them, and then this token is not emitted.
    Status status;
    for (int32_t t : c.behind) {
      status = c.matcher->Advance(t);
      if (!status.ok() || c.matcher->IsCompleted()) break;
    }
    c.behind.clear();
    if (!status.ok() || c.matcher->IsCompleted()) {
      EndAtConstraint(r, c, status, events);
      return;
    }
  }
  c.history.AddOutput(id);
  if (c.generated++ == 0) c.first_token = Clock::now();
  ++stats_.generated_tokens;
  Status constraint_status;
  std::optional<bool> completed;  // the constraint's, once the matcher has taken the token
  if (c.matcher && c.matcher_active) {
    // The automaton may be busy computing another completion's mask (milliseconds), or a verify
    // chunk's later rows: the engine thread does not wait for it when nothing but the constraint
    // could end the completion at this token — the token is left to the completion's next mask
    // job, which applies it and reports an error or the constraint's completion then (CatchUp);
    // so are the tokens after it (a verify chunk emits several). Not with stop strings (their
    // check would come before the constraint's). Speculation drafts nothing while tokens are left
    // (LimitDrafts), and a verify chunk's drafts never go past the constraint's completion, so
    // only its last token — EOS, forced by the mask of a completed constraint — may follow one
    // (the tokens left behind are applied above, before such a token).
    if (!other_finish) {
      if (c.behind.empty()) completed = c.matcher->TryAdvance(id);
      if (!completed) {
        c.behind.push_back(id);
        ++stats_.structured_deferred_advances;
      }
    } else {
      constraint_status = c.matcher->Advance(id);
      if (constraint_status.ok()) completed = c.matcher->IsCompleted();
    }
  } else if (c.matcher && id == think_end_id_) {
    c.matcher_active = true;  // the reasoning ended: the answer is constrained from here
    completed = c.matcher->IsCompleted();  // (a constraint of the empty answer only)
  }

  StreamEvent ev;
  ev.request_id = r.id;
  ev.index = c.index;
  ev.ids = {id};
  if (p.logprobs || p.top_logprobs > 0)
    ev.logprobs.push_back({id, d.token.logprob, ToPublicLogprobs(d.token.top)});
  if (p.prompt_logprobs >= 0 && c.index == 0 && !r.prompt_logprobs_sent) {
    r.prompt_logprobs.resize(r.req.prompt.size() - 1);  // a 1-token prompt has none
    ev.prompt_logprobs = std::move(r.prompt_logprobs);
    ev.prompt_ids = r.req.prompt;
    r.prompt_logprobs_sent = true;
  }
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
  if (finish == FinishReason::kNone) {  // (`length` counts this token: c.generated does now)
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end()) {
      finish = FinishReason::kStop;
      ev.stop = "id:" + std::to_string(id);
    } else if (completed.value_or(false)) {
      finish =
          FinishReason::kStop;  // the constraint is complete (EOS included): nothing may follow
    } else if (id == runner_->info().eos_token_id && !p.ignore_eos) {
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
  s.overlap = overlap_;
  s.graph_decode_steps = runner_->graph_decode_steps();
  if (const model::ExpertParallelStats* ep = runner_->expert_parallel_stats()) {
    s.expert_parallel = ep->ranks;
    s.eplb_rebalances = ep->rebalances;
    s.eplb_experts_moved = ep->experts_moved;
    s.eplb_imbalance_before = ep->imbalance_before;
    s.eplb_imbalance_after = ep->imbalance_after;
    s.eplb_imbalance_contiguous = ep->imbalance_contiguous;
    s.eplb_imbalance_measured = ep->imbalance_measured;
  }
  s.graph_multi_token_steps = runner_->graph_multi_token_steps();
  s.graph_draft_passes = runner_->graph_draft_passes();
  s.spec_num_tokens = spec_.method == SpeculativeOptions::Method::kNone ? 0 : spec_.num_tokens;
  const auto sched = scheduler_->Stats();
  s.requests_waiting = sched.waiting;
  s.requests_running = sched.running;
  s.preemptions = sched.preemptions;
  const auto cache = cache_->Stats();
  s.preempted_readmissions = sched.readmissions;
  s.preempted_resumed = sched.resumed;
  s.preempted_tokens_recomputed = sched.recomputed_tokens;
  if (prefix_) {
    s.prefix_cache_entries = static_cast<int64_t>(prefix_->size());
    // A page a cached state shares with a running request counts here (once).
    s.prefix_cache_bytes = cache_->BytesOf(prefix_->Ids());
  }
  if (host_) {
    s.host_cache_entries = static_cast<int64_t>(host_->size());
    s.host_cache_bytes = host_->bytes_used();
    s.host_cache_bytes_total = host_->budget_bytes();
  }
  s.state_bytes_used = cache.bytes_used - s.prefix_cache_bytes;
  s.state_bytes_total = cache.bytes_total;
  s.state_bytes_shared = cache.bytes_referenced - cache.bytes_used;
  return s;
}

}  // namespace dsinfer::engine
