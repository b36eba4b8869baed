// ModelRunner: the seam between the engine and a model on a backend (ARCHITECTURE.md §1). A step's
// chunks go in — one per sequence: the tokens appended at the sequence's current length — with the
// draws to make from chunks' last rows, and the drawn tokens (with the logprobs asked for) come
// out: the sampler runs where the logits are (the CPU sampler, or the CUDA sampling kernel, which
// picks the CPU sampler's tokens from the same logits), so on a GPU only ids and logprobs cross.
// A step is three calls — Launch (the forward), Sample (the draws), Collect (their ids) — so that
// the engine can plan the next step while a GPU runs this one (overlap scheduling): a chunk may
// then end with a token drawn by the previous step that the host has not read yet (RunChunk::feed),
// which the runner takes where the draws are.
// The CPU runner drives any model family through the family seam (model/language_model.h), so
// the same engine serves DeepSeek-V4 and DeepSeek-V4.1; the CUDA runner runs DeepSeek-V4.
// The runner keeps each sequence's model state in the engine's state cache pages
// (cache::StateCache, addressed by the layout it reports) and drops or copies it when the engine
// says so. The engine, scheduler, sampler and cache are the same for every backend; only the runner
// differs (CpuModelRunner here; the CUDA runner is the GPU engine issue's). Not thread-safe: the
// engine thread owns a runner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/state_cache.h"
#include "cache/state_layout.h"
#include "io/model_config.h"
#include "model/language_model.h"
#include "sampler/sampler.h"
#include "scheduler/batch_plan.h"

namespace dsinfer::executor {

struct RunChunk {
  scheduler::SeqId seq = 0;
  int64_t start = 0;            // the sequence's length before this chunk
  std::vector<int32_t> tokens;  // appended at positions start, start + 1, ...
  // >= 0: the last token is draw `feed` of the previous Sample call, whose id the host may not
  // have yet (tokens.back() is then a placeholder).
  int feed = -1;
};

// One token to draw from a row of chunks[chunk]: its last (n > 1 siblings draw from one row), or
// in a speculative verify chunk each of its last k + 1 rows.
struct RunDraw {
  int chunk = 0;
  int row = -1;                // the row, counted from the chunk's first token; -1: the last
  sampler::SampleInput input;  // its pointers stay valid for the call
};

// Model drafting for one sequence (ModelRunner::DraftMtp, DraftDSpark).
struct MtpDraftRequest {
  scheduler::SeqId seq = 0;
  int32_t next_token = 0;  // the token drawn after the sequence's last row (not yet run)
  int count = 1;           // drafts wanted (>= 1)
};

struct RunOutput {
  std::vector<sampler::SampledToken> tokens;  // one per draw, in draw order
};

// A sequence's state copied out of the state cache's pages into host memory (the prefix cache's
// host tier, ModelRunner::Offload), opaque to the engine: the CPU runner's is a heap blob in the
// cache's page geometry, the CUDA runner's pinned memory its pages were copied to. Destroying one
// is always safe (a copy still running finishes first, without blocking the engine on a GPU).
class HostState {
 public:
  virtual ~HostState() = default;
  virtual int64_t bytes() const = 0;   // host memory held
  virtual int64_t length() const = 0;  // tokens its state covers
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // The model's family, vocabulary, special ids and context.
  virtual const model::ModelInfo& info() const = 0;
  // The layout of every sequence's state (what the cache plans its pools over).
  virtual const cache::StateLayout& state_layout() const = 0;
  // The cache whose pages hold the sequences' state; set once, before the first Run (the CUDA
  // runner allocates its device pools then, as the cache's plan says).
  virtual Status BindCache(cache::StateCache* cache) = 0;
  // The state memory to plan when none is given: the CPU's default, or on a GPU what the model
  // left free up to `gpu_memory_utilization` of the device.
  virtual int64_t StateMemoryBudget(double gpu_memory_utilization) const {
    (void)gpu_memory_utilization;
    return int64_t{1} << 30;
  }
  // One step in three calls. Launch enqueues the forward of `chunks`, keeping the logits of the
  // last tails[i] rows of chunk i (DrawTails). A sequence's first chunk starts at 0 (its state is
  // created then); each sequence appears at most once. Logits depend only on each sequence's own
  // tokens (batch invariance), never on the other chunks of the step.
  virtual Status Launch(const std::vector<RunChunk>& chunks, const std::vector<int64_t>& tails) = 0;
  // Enqueues draws from the launched step's logits rows (RunDraw::chunk indexes its chunks). A
  // draw depends only on its row and input; the inputs' pointers are read during the call.
  virtual Status Sample(const std::vector<RunDraw>& draws) = 0;
  // Whether the launched forward's logits are computed (a GPU may still be running it); never
  // blocks. The engine's deadline for late grammar masks counts from then.
  virtual bool LogitsReady() const { return true; }
  // Waits for the last Sample's tokens (one per draw, in draw order). Every Sample is collected
  // before the next Sample; the next Launch may come first (its feeds read this Sample's draws).
  virtual StatusOr<RunOutput> Collect() = 0;
  // The three at once.
  StatusOr<RunOutput> Run(const std::vector<RunChunk>& chunks, const std::vector<RunDraw>& draws);
  // The state operations below act on the state as the launched forwards leave it (on a GPU they
  // are enqueued behind them).
  // Drops a sequence's state (finished, aborted or preempted); unknown ids are ignored.
  virtual void Release(scheduler::SeqId seq) = 0;
  // Returns a sequence's state to its first `length` tokens, exactly (spec §3.4): the rejected
  // tokens of a speculative verify chunk, or the last token of a row whose draw sat out the step
  // (its grammar mask was late) — at most RunnerOptions::max_draft_tokens or max_rollback tokens.
  // A page of rows to be rewritten that the sequence shares is first copied (StateCache::Unshare;
  // ShareableLength keeps this from happening in the engine).
  virtual Status Rollback(scheduler::SeqId seq, int64_t length) = 0;
  // MTP drafting (RunnerOptions::mtp, a model with an MTP layer; spec §2.11): for each request the
  // MTP layer first runs the sequence's rows it has not seen (row i pairs the main model's streams
  // at position i with token i + 1; the last row with next_token), then chains count - 1 more rows
  // on its own outputs; the drafts are the greedy tokens (ties to the smallest id). The chained
  // rows are dropped again, so the MTP state ends at the main model's length.
  virtual bool has_mtp() const { return false; }
  virtual StatusOr<std::vector<std::vector<int32_t>>> DraftMtp(
      const std::vector<MtpDraftRequest>& requests) {
    (void)requests;
    return Unimplemented("this model runner has no MTP drafter");
  }
  // DSpark drafting (RunnerOptions::dspark, DeepSeek-V4.1's drafter): for each request the
  // drafter's whole block after the sequence's last row, anchored on next_token (`count` is not
  // read: a block costs the same at any length), with each draft's acceptance probability from the
  // confidence head. The sequences' states do not change (the drafter's context rings are part of
  // the state, written by every forward).
  virtual bool has_dspark() const { return false; }
  virtual StatusOr<std::vector<model::BlockDraft>> DraftDSpark(
      const std::vector<MtpDraftRequest>& requests) {
    (void)requests;
    return Unimplemented("this model runner has no DSpark drafter");
  }
  // Copies `parent`'s state as it is (the prompt, right after its prefill) into `child`'s pages,
  // which the cache has reserved (n > 1 completions share the prompt's prefill). Pages the child
  // shares with the parent (StateCache::Share) are not copied.
  virtual void Fork(scheduler::SeqId parent, scheduler::SeqId child) = 0;
  // Copy-on-write (StateCache::Share): of `seq`'s state of its first `length` tokens (at most its
  // length), the tokens whose list rows are written and that going on from `length` (appending;
  // the MTP layer's rows from its own length) never writes again, so that they may be shared. A
  // rollback below it is the caller's to leave out (a verify chunk's never goes below the chunk's
  // start; a late mask's goes one token back); else Rollback copies what it would rewrite.
  // 0: nothing (a runner whose states cannot share pages).
  virtual int64_t ShareableLength(scheduler::SeqId seq, int64_t length) const {
    (void)seq;
    (void)length;
    return 0;
  }
  // `from`'s state becomes `to`'s (the cache renamed its pages the same way).
  virtual void Rename(scheduler::SeqId from, scheduler::SeqId to) = 0;
  // The host tier: copies `seq`'s state (as the launched forwards leave it: on a GPU the copy is
  // enqueued behind them) into host memory; `seq` keeps its state until Release. Unimplemented on
  // a runner without one.
  virtual StatusOr<std::unique_ptr<HostState>> Offload(scheduler::SeqId seq) {
    (void)seq;
    return Unimplemented("this model runner has no host-memory tier");
  }
  // `seq`, which holds no state yet and whose pages the cache has reserved for at least
  // state.length() tokens, becomes a copy of an offloaded state (enqueued before the next
  // forward). `state` stays as it is: it may be restored again.
  virtual Status Restore(const HostState& state, scheduler::SeqId seq) {
    (void)state;
    (void)seq;
    return Unimplemented("this model runner has no host-memory tier");
  }
  // Sequences that hold state (for tests: 0 once everything has finished).
  virtual size_t num_sequences() const = 0;
  // Steps replayed from CUDA graphs so far: of one token per sequence, of several (speculative
  // verify steps); the drafter's passes (DSpark). None on runners without graphs.
  virtual int64_t graph_decode_steps() const { return 0; }
  // Expert parallelism's stats (null: the model is not split).
  virtual const model::ExpertParallelStats* expert_parallel_stats() const { return nullptr; }
  virtual int64_t graph_multi_token_steps() const { return 0; }
  virtual int64_t graph_draft_passes() const { return 0; }
};

enum class Device { kAuto, kCpu, kCuda };
const char* DeviceName(Device device);  // "auto", "cpu", "cuda"
// kAuto: CUDA when this build has it and a device is visible, else the CPU; kCuda without a
// build or a device: Unimplemented / NotFound.
StatusOr<Device> ResolveDevice(Device device);

struct RunnerOptions {
  std::string model_dir;
  std::string random_preset;  // else: this preset with device-random weights (CUDA only)
  uint64_t random_seed = 1;
  bool cuda_graphs = true;  // CUDA: decode steps replay graphs (EngineOptions::enforce_eager)
  // CUDA, DeepSeek-V4.1: the Engram tables in pinned host memory (EngineOptions).
  bool engram_host_tables = false;
  std::function<void(int64_t, int64_t)> load_progress;  // CUDA: EngineOptions::load_progress
  Device device = Device::kCpu;                         // resolved (not kAuto)
  int num_threads = 0;                                  // CPU: model threads (0: all)
  // EngineOptions::expert_parallel, eplb_redundant_experts, eplb_interval (the CPU backend).
  int expert_parallel = 1;
  int eplb_redundant_experts = 0;
  int64_t eplb_interval = 0;
  // EngineOptions::kv_cache_dtype.
  io::KvCacheDtype kv_cache_dtype = io::KvCacheDtype::kAuto;
  // Speculative decoding: the most draft tokens of one verify chunk (the state rings keep this
  // much rollback slack; CUDA: at most 16), and whether the MTP drafter runs (it keeps the main
  // model's streams of the rows its layer has not yet seen).
  int max_draft_tokens = 0;
  bool mtp = false;
  bool dspark = false;  // DeepSeek-V4.1's DSpark drafter runs (its context rings in the state)
  // Tokens a Rollback may remove besides the drafts (1: a draw that sits out a step because its
  // grammar mask was late has its row's token rolled back). The rollback slack is the larger.
  int max_rollback = 0;
  // CUDA: logits for every row of a step (prompt logprobs), not only each sequence's last 1 + k.
  bool all_logits = false;
  // CUDA: state slots (sequences held at once), tokens each slot holds, rows per step. The CUDA
  // model keeps its state in fixed device slots until its paged state lands.
  int max_sequences = 64;
  int64_t max_len = 4096;
  int64_t max_tokens = 256;
};

// The logits rows a run computes: per chunk, how many trailing rows its draws read (0: none).
std::vector<int64_t> DrawTails(const std::vector<RunChunk>& chunks,
                               const std::vector<RunDraw>& draws);
// Each draw's row among those logits rows (each chunk's tail, in chunk order), for chunks of
// counts[i] tokens.
std::vector<int64_t> DrawLogitsRows(const std::vector<int64_t>& counts,
                                    const std::vector<RunDraw>& draws,
                                    const std::vector<int64_t>& tails);

StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const RunnerOptions& options);
// Unimplemented when options asks for expert parallelism on CUDA (kAuto: not refused here; the
// runner refuses it once the device resolves to CUDA).
Status CheckExpertParallelDevice(const RunnerOptions& options);
// The ModelInfo of the model the runner will run: the model dir's config.json, or the preset's.
StatusOr<model::ModelInfo> LoadRunnerInfo(const RunnerOptions& options);
// The DeepSeek-V4 config of the model the runner will run (the CUDA backend's model).
StatusOr<io::DeepseekV4Config> LoadRunnerConfig(const RunnerOptions& options);
// Whether a --random-preset names a DeepSeek-V4.1 preset ("v41-..."; deepseek_v41/init_presets.h).
bool IsV41Preset(const std::string& preset);

// The CPU backend: the exact reference model of the model dir's family (model/deepseek_v4,
// model/deepseek_v41) on `num_threads` threads (0: all).
StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const RunnerOptions& options);
// The CUDA backend (CUDA builds with a device): model/deepseek_v4/cuda's CudaModel.
StatusOr<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const RunnerOptions& options);

}  // namespace dsinfer::executor
