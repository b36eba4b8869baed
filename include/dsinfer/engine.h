// The dsinfer embedding API: create an engine from a model dir, submit generation requests from any
// thread (text, token ids, or chat messages), stream their outputs, abort them, or run a batch
// offline. One engine thread owns the model, scheduler, state cache and sampler; Submit / Abort /
// Stats / Generate are thread-safe and talk to it through queues. RequestStream is read by one
// consumer thread.
//
//   auto engine = dsinfer::Engine::Create({.model_dir = "models/tiny"}).value();
//   dsinfer::GenerateRequest req;
//   req.prompt_ids = {0, 100, 2000};
//   req.params.max_tokens = 8;
//   auto results = engine->Generate({req});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dsinfer/status.h"

namespace dsinfer {

// What a request's output must match (structured output): response_format / structured_outputs,
// or a forced tool call (tool_choice "required" / a named function: kToolCalls).
struct OutputConstraint {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar, kToolCalls };
  Kind kind = Kind::kNone;
  // json_schema: the schema (JSON); regex: the pattern; grammar: GBNF; tool_calls: the allowed
  // tools, the forced name and parallelism (JSON, as the request layer wrote it)
  std::string text;
  std::vector<std::string> choices;  // choice: the allowed outputs
  bool active() const { return kind != Kind::kNone; }
};

// How one request turns logits into tokens and when it stops (OpenAI / vLLM semantics). A plain
// value type; the engine checks it at Submit (InvalidArgument naming the field).
struct SamplingParams {
  int n = 1;                            // completions per prompt; they share the prompt's prefill
  float temperature = 1.0f;             // 0: greedy (argmax, ties to the smallest id)
  int top_k = 0;                        // <= 0: off
  float top_p = 1.0f;                   // nucleus mass in (0, 1]
  float min_p = 0.0f;                   // drop tokens with p < min_p * p_max; [0, 1]
  float repetition_penalty = 1.0f;      // > 0; divides positive / multiplies negative seen logits
  float presence_penalty = 0.0f;        // [-2, 2]; subtracted once per token present in the output
  float frequency_penalty = 0.0f;       // [-2, 2]; subtracted per occurrence in the output
  std::map<int32_t, float> logit_bias;  // token id -> bias in [-100, 100]
  std::vector<std::string> stop;        // stop strings (text; need a tokenizer)
  std::vector<int32_t> stop_token_ids;  // stop on these ids (the id is kept in the output)
  int max_tokens = 16;                  // >= 1
  int min_tokens = 0;                   // EOS and stop ids are masked until this many tokens exist
  bool ignore_eos = false;              // keep generating past EOS
  bool logprobs = false;                // return the chosen token's logprob
  int top_logprobs = 0;                 // and this many most likely alternatives, [0, 20]
  // >= 0: the logprob of every prompt token after the first, with this many alternatives ([0,
  // 20]; RequestResult::prompt_logprobs); -1: none. The prompt is then computed in full (no prefix
  // cache); on a GPU the engine needs EngineOptions::prompt_logprobs.
  int prompt_logprobs = -1;
  std::optional<uint64_t> seed;  // fixed seed: same tokens alone or in any batch
  bool include_stop_str_in_output = false;
  OutputConstraint structured_outputs;  // JSON schema / regex / choice / grammar (none: free text)

  bool greedy() const { return temperature == 0.0f; }
  // Range checks that need no model: InvalidArgument naming the field.
  Status Validate() const;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

namespace engine {
class EngineCore;
class EngineLoop;
}  // namespace engine

// Where the model runs: kAuto is CUDA when the build has it and a GPU is visible, else the CPU.
enum class Device { kAuto, kCpu, kCuda };

// Speculative decoding: cheap drafts of the next tokens, verified in one forward step. A draft is
// accepted exactly when it is the token the sampler draws at its position (same seeded draw), so
// outputs are bit-identical with speculation on and off.
struct SpeculativeOptions {
  enum class Method {
    kNone,
    kNgram,  // prompt lookup: what followed the latest earlier occurrence of the last n tokens
    kMtp,    // the model's MTP layer, chained for more than one draft
    // DeepSeek-V4.1's DSpark drafter: a block of drafts in one pass, with each draft's acceptance
    // probability (its confidence head), which sets the drafts verified with `adaptive`
    kDSpark,
  };
  Method method = Method::kNone;
  int num_tokens = 3;     // drafts per verify step, 1..16 (DSpark: 0, its block: all it drafts)
  bool adaptive = false;  // each request drafts fewer when its recent drafts were rejected
  int ngram_min = 1;      // n-gram: shortest and longest suffix matched
  int ngram_max = 4;
};
// "none", "ngram", "mtp", "dspark"
const char* SpeculativeMethodName(SpeculativeOptions::Method method);

struct EngineOptions {
  std::string model_dir;
  Device device = Device::kCpu;
  std::string tokenizer_path;          // "": <model_dir>/tokenizer.json when it exists (with a
                                       // random_preset: none)
  int num_threads = 0;                 // CPU threads of the model (0: all)
  // Expert parallelism (DeepSeek-V4, the CPU backend for now): the routed experts sharded over
  // this many ranks (threads of this process; the rest of the model replicated, each step's
  // requests split among them); the same results as 1. EPLB: spare expert slots per MoE layer
  // for replicas of busy experts, and the forwards between re-plans from the routed rows counted
  // meanwhile (0: the placement stays).
  int expert_parallel = 1;
  int eplb_redundant_experts = 0;
  int64_t eplb_interval = 0;
  // Budget for per-request model state; 0: 1 GiB on the CPU, and on a GPU what the model leaves
  // free up to gpu_memory_utilization of the device (vLLM's --gpu-memory-utilization).
  int64_t state_memory_bytes = 0;
  double gpu_memory_utilization = 0.9;
  // CUDA: decode steps launch every kernel instead of replaying a graph captured per batch size
  // (vLLM's --enforce-eager; for debugging and A/B timing: the same bits either way).
  bool enforce_eager = false;
  // CUDA, DeepSeek-V4.1: the Engram tables in pinned host memory, read over PCIe by the lookup
  // (the release's tables fit no GPU; the same bits as device tables). Ignored by other models.
  bool engram_host_tables = false;
  // The attention state's rounding and storage (vLLM's --kv-cache-dtype): "float32" (the values
  // as computed: transformers' forward), "fp8" (the official forward's cache: FP8 K=V rows with
  // bf16 RoPE dims, FP4 index keys, rounded as the official forward rounds them; 4x less state
  // memory), "auto" (float32 for DeepSeek-V4; DeepSeek-V4.1 is always fp8).
  std::string kv_cache_dtype = "auto";
  // CUDA: called (on the creating thread) as the weights reach the device: bytes so far, and the
  // checkpoint's tensor bytes (the CLI draws a progress line on a terminal).
  std::function<void(int64_t done_bytes, int64_t total_bytes)> load_progress;
  // Tokens per step (prefill chunks + decodes); 0: kCpuBatchTokens on the CPU, kCudaBatchTokens
  // with CUDA (where the tiled tensor-core GEMMs need many rows: docs/perf.md, "GPU engine").
  int64_t max_batch_tokens = 0;
  static constexpr int64_t kCpuBatchTokens = 256;
  static constexpr int64_t kCudaBatchTokens = 2048;
  int max_running = 64;                // sequences in flight
  int64_t max_model_len = 0;           // 0: the model's max_position_embeddings (CUDA: at most
                                       // 4096 by default: its state slots hold this many tokens)
  int64_t typical_length = 2048;       // the memory planner's assumption (cache/memory_planner.h)
  int64_t state_page_tokens = 128;     // tokens a page of a growing state list covers (at most)
  // Benchmarks: instead of model_dir, a preset of `dsinfer init-model` (e.g. "flash-l8") whose
  // weights are generated on the device from random_seed (CUDA only; token ids only: no tokenizer).
  std::string random_preset;
  uint64_t random_seed = 1;
  SpeculativeOptions speculative;
  // Prefix cache: the state of a request's tokens is kept after it (checkpoints every
  // prefix_checkpoint_interval tokens, at the end of each prompt and of each completion), and a
  // later request that starts with the same tokens restores the longest such state and computes
  // only the rest — the outputs are bit-identical to a cold run. Cached states give way (least
  // recently used first) to running requests before anything is preempted.
  bool prefix_cache = true;
  int64_t prefix_checkpoint_interval = 512;  // tokens, a multiple of 128
  // States held at most. 0: up to max_running, in the memory the running requests leave free
  // (no memory is set aside); N > 0: N, with their rings planned beside the running requests'.
  int prefix_cache_entries = 0;
  // A preempted request's state is kept as a cached state of its tokens so far (prompt and
  // output), so that its readmission restores it instead of recomputing (prefix cache only).
  bool prefix_keep_preempted = true;
  // Copy-on-write state pages: a copy of a request's state (n > 1 completions forked after the
  // prompt, a prefix cache state and a request restored from it) shares the original's pages of
  // the append-only compressed-KV and index-key lists instead of copying them; only the rings and
  // a partly filled last page are copied. false: every page is copied (for A/B measurements).
  bool share_state_pages = true;
  // The prefix cache's host-memory tier: cached states evicted from state memory are copied to
  // host memory (pinned on a GPU) up to this many bytes, least recently used out first, and
  // restored from there on a hit (0: off; evicted states are dropped).
  int64_t host_cache_bytes = 0;
  // One-step overlap scheduling: the engine schedules step N+1 and emits step N-1 while the device
  // runs step N (outputs are the same either way). kAuto: on with CUDA, off on the CPU (whose
  // device is the engine's own cores). It is off while speculating: drafts need the previous
  // step's tokens.
  enum class Overlap { kAuto, kOn, kOff };
  Overlap overlap = Overlap::kAuto;
  // CUDA: keep logits for every row of a step, so that requests may ask for prompt_logprobs (the
  // buffer grows to max_batch_tokens rows of the vocabulary: 0.5 MB a row for V4's). The CPU
  // always can.
  bool prompt_logprobs = false;
  // Structured output: a step's grammar masks are computed on CPU threads while its forward runs
  // (each depends on the token drawn just before). A draw whose mask is not ready this many
  // microseconds after the step's logits are (the forward done) sits out the step instead of
  // stalling the batch: its row is run again by the next step, and its token is the same (drawn
  // with the same seed, completion and position). 0: the step waits for every mask.
  int64_t structured_mask_deadline_us = 2000;
};

struct ChatMessage {
  std::string role;     // system | user | assistant | tool
  std::string content;
  // Optional: the whole OpenAI message object as JSON text (tool_calls, reasoning_content,
  // tool_call_id, content parts, ...). When set it is rendered instead of role/content.
  std::string json;
};

// How `messages` are rendered (the DeepSeek-V4 recipe; the dialect follows the model dir).
struct ChatOptions {
  bool thinking = false;         // thinking mode (reasoning before the answer)
  std::string reasoning_effort;  // "": the dialect's default
  std::string tools_json;        // OpenAI `tools` array as JSON text ("": no tools)
};

// A chat completion parsed by the recipe's output parser (reasoning, answer, DSML tool calls).
struct ChatReply {
  struct ToolCall {
    std::string name;
    std::string arguments;  // a JSON object as text
  };
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// Exactly one of prompt (text, encoded as is: no BOS is added), prompt_ids, messages (chat).
struct GenerateRequest {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<ChatMessage> messages;
  ChatOptions chat;
  SamplingParams params;
  int priority = 0;  // lower runs first; waiting requests age, so none starves
  // false: a prompt plus params.max_tokens beyond the context is refused (OutOfRange, with the
  // numbers); true: max_tokens is only an upper bound and generation stops at the context (the
  // server's chat default when max_tokens is not given, as vLLM).
  bool max_tokens_up_to_context = false;
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* FinishReasonName(FinishReason reason);  // "", "stop", "length", "abort", "error"

struct TokenLogprobs {
  int32_t id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

// One streaming event of one completion (index < n). The last event of a completion has
// finish != kNone and carries its usage and timing.
struct StreamEvent {
  uint64_t request_id = 0;
  int index = 0;
  std::vector<int32_t> ids;             // new token ids
  std::string text;                     // new text (empty without a tokenizer)
  std::vector<TokenLogprobs> logprobs;  // per new id, if asked
  // SamplingParams::prompt_logprobs: on completion 0's first event, prompt tokens 1..n-1's, and
  // the prompt's ids.
  std::vector<TokenLogprobs> prompt_logprobs;
  std::vector<int32_t> prompt_ids;
  FinishReason finish = FinishReason::kNone;
  std::string stop;                     // the stop string or "id:N" that ended it
  Status error;                         // with kError
  int64_t prompt_tokens = 0;            // on the last event
  int64_t completion_tokens = 0;        // on the last event
  double ttft_s = 0;                    // on the last event: arrival -> first token
  double e2e_s = 0;                     // on the last event: arrival -> finish
  int64_t draft_tokens = 0;             // on the last event: speculative drafts verified
  int64_t accepted_tokens = 0;          // on the last event: of those, accepted
};

struct Completion {
  int index = 0;
  std::vector<int32_t> ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string stop;
  double ttft_s = 0;
  double e2e_s = 0;
  int64_t draft_tokens = 0;     // speculative drafts verified
  int64_t accepted_tokens = 0;  // of those, accepted
};

struct RequestResult {
  uint64_t id = 0;
  Status status;  // not OK: the request was rejected or failed; completions may be partial
  int64_t prompt_tokens = 0;
  std::vector<Completion> completions;  // [n]
  // SamplingParams::prompt_logprobs: prompt tokens 1..n-1's logprobs (the first has none).
  std::vector<TokenLogprobs> prompt_logprobs;
};

struct EngineStats {
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;
  int64_t requests_waiting = 0;   // sequences
  int64_t requests_running = 0;   // sequences
  int64_t prompt_tokens = 0;      // of finished-or-running requests, counted once
  int64_t generated_tokens = 0;
  int64_t forward_tokens = 0;     // tokens run through the model (recomputation included)
  int64_t steps = 0;
  int64_t preemptions = 0;
  // Steps whose chunks are all single decode tokens: their count, their rows (so the mean decode
  // batch is decode_rows / decode_steps) and the wall time of their forward + sampling (the
  // runner's Run, which ends when the sampled ids are on the host).
  int64_t decode_steps = 0;
  int64_t decode_rows = 0;
  int64_t decode_context = 0;  // their rows' context lengths, summed
  double decode_run_s = 0;
  double run_s = 0;  // the same for every step
  // Steps replayed from CUDA graphs: decode steps, and steps of several tokens per sequence
  // (speculative verify steps); the drafter's passes (DSpark) replayed as graphs. 0 on the CPU or
  // with enforce_eager.
  int64_t graph_decode_steps = 0;
  int64_t graph_multi_token_steps = 0;
  int64_t graph_draft_passes = 0;
  // The engine thread's time in steps, and the part of it spent waiting for the device's tokens
  // (step_s - wait_s is the host's own work: scheduling, launching, masks, emitting). With
  // overlap scheduling a step's run (launch to collect) spans the next step's host work, so
  // run_s may exceed the wall time.
  double step_s = 0;
  double wait_s = 0;
  bool overlap = false;  // overlap scheduling is on (EngineOptions::overlap, resolved)
  // Speculative decoding: the drafts a verify step takes at most (SpeculativeOptions::num_tokens,
  // resolved: DSpark's 0 is its block), sequence steps that verified drafts, drafts verified,
  // drafts accepted.
  int spec_num_tokens = 0;
  int64_t spec_verify_rows = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // Structured output: draws that sat out a step because their grammar mask was late
  // (EngineOptions::structured_mask_deadline_us; a speculative verify chunk counts once, whether
  // it sat out or drew at the rows whose masks were ready), the engine thread's time waiting for
  // masks, and emitted tokens whose constraint state a mask worker computed (the automaton was busy
  // with a mask at the emit, which the engine thread does not wait for).
  int64_t structured_mask_late = 0;
  double structured_mask_wait_s = 0;
  int64_t structured_deferred_advances = 0;
  // Prefix cache: admissions that looked up a cached state, those that found one, the prompt
  // tokens those restored instead of computing, states stored and evicted from state memory (to
  // the host tier when it is on, else dropped), states held now (in either tier) and their bytes
  // of state memory (each page once; a page they share with a running request counts here, not
  // in state_bytes_used).
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
  int64_t prefix_tokens_reused = 0;
  int64_t prefix_checkpoints = 0;
  int64_t prefix_evictions = 0;
  int64_t prefix_cache_entries = 0;
  int64_t prefix_cache_bytes = 0;
  // Preemption: sequences preempted whose state was kept as a cached state; readmissions of
  // preempted sequences, those that restored at least the state they had, and the tokens the
  // others computed again.
  int64_t preempted_states_kept = 0;
  int64_t preempted_readmissions = 0;
  int64_t preempted_resumed = 0;
  int64_t preempted_tokens_recomputed = 0;
  // The host tier (EngineOptions::host_cache_bytes): states copied out of state memory into it,
  // hits restored from it, states dropped from it (its least recently used), the states and
  // bytes it holds now, and its budget. Its states count in prefix_cache_entries too, not in
  // prefix_cache_bytes.
  int64_t host_cache_offloads = 0;
  int64_t host_cache_restores = 0;
  int64_t host_cache_evictions = 0;
  int64_t host_cache_entries = 0;
  int64_t host_cache_bytes = 0;
  int64_t host_cache_bytes_total = 0;
  // Expert parallelism (EngineOptions::expert_parallel): its ranks, EPLB's placements installed,
  // expert weights moved between ranks, and the last plan's expected busiest-rank MoE load over
  // the mean under the old and the new placement (1: balanced; 0: no plan yet).
  int expert_parallel = 1;
  int64_t eplb_rebalances = 0;
  int64_t eplb_experts_moved = 0;
  double eplb_imbalance_before = 0;
  double eplb_imbalance_after = 0;
  double eplb_imbalance_contiguous = 0;  // the same rows over the experts in order, no replicas
  double eplb_imbalance_measured = 0;    // the rows each rank's experts computed, as they ran
  int64_t state_bytes_used = 0;   // state cache accounting
  // State memory that copy-on-write sharing saves now: the pages several requests or cached states
  // hold, counted once per extra holder (in use, each counts once in the figures above).
  int64_t state_bytes_shared = 0;
  // Peaks over the steps so far (after each step): state memory in use (running requests and
  // cached states, each page once) and state_bytes_shared.
  int64_t state_bytes_peak = 0;
  int64_t state_bytes_shared_peak = 0;
  int64_t state_bytes_total = 0;
};

// The events of one request, in order. Next() blocks until an event arrives; it returns false once
// every completion has had its final event. An event loop (the server) uses TryNext() and
// SetNotify() instead, so that no thread blocks on a stream.
class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual uint64_t id() const = 0;
  virtual bool Next(StreamEvent* event) = 0;
  // Non-blocking: moves the next queued event to `event` and returns true, or returns false when
  // none is queued now (the stream has ended once every completion's final event was taken).
  virtual bool TryNext(StreamEvent* event) = 0;
  // `notify` runs on the engine thread after each event is queued, and once at once if events are
  // queued already; it must be quick and must not block or call into this stream (post to an
  // event loop and TryNext() there). Replaces an earlier callback; an empty function removes it.
  virtual void SetNotify(std::function<void()> notify) = 0;
};

// Reads `stream` to its end (blocking) and gathers its events into a result for n completions.
RequestResult CollectResult(RequestStream& stream, int n);

class Engine {
 public:
  // NotFound / InvalidArgument / DataLoss for a bad model dir, ResourceExhausted for a state budget
  // too small for one request.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and encodes the request in the calling thread (InvalidArgument for bad sampling
  // parameters or ids, OutOfRange for a prompt longer than the context, ResourceExhausted if it
  // can never fit the state budget), then queues it.
  StatusOr<std::shared_ptr<RequestStream>> Submit(const GenerateRequest& request);
  // Ends a request early; its streams get a final kAbort event. Unknown ids are ignored.
  void Abort(uint64_t request_id);
  // Offline batch: submits all, waits for all. Results are in request order; a rejected request
  // has a non-OK status and the others still run.
  std::vector<RequestResult> Generate(const std::vector<GenerateRequest>& requests);
  EngineStats Stats() const;

  int64_t vocab_size() const;
  int64_t max_model_len() const;
  bool has_tokenizer() const;
  // Parses generated ids of a chat request (`messages`) into reasoning / content / tool calls
  // with the model's dialect. InvalidArgument without a tokenizer. Thread-safe.
  StatusOr<ChatReply> ParseChatReply(const std::vector<int32_t>& ids, const ChatOptions& chat) const;
  // A line describing the state-memory plan.
  std::string MemoryPlanDescription() const;
  // "cpu" or "cuda": where the model runs.
  std::string device() const;
  // Tokens per step (EngineOptions::max_batch_tokens, 0 resolved for the device).
  int64_t max_batch_tokens() const;
  // The model family: "DeepSeek-V4" or "DeepSeek-V4.1".
  std::string model_family() const;

 private:
  Engine() = default;
  std::unique_ptr<engine::EngineLoop> loop_;
};

}  // namespace dsinfer
