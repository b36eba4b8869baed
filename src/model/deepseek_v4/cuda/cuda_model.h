// DeepSeek-V4 on the CUDA backend: the same forward as the CPU model (spec §2; model.cc is the
// reference), composed from backend/cuda ops, with weights on the GPU in their checkpoint formats
// (FP8 + ue8m0 block scales, FP4 experts + per-32 scales, BF16/F32 others; small vectors as fp32)
// and per-request state in fixed GPU slots (window ring, compressor rings, compressed and index-key
// lists, fp32), so a step allocates nothing and a decode step can be captured in a CUDA graph.
//
// Activations are fp32, as on the CPU; every kernel is deterministic and batch-invariant, so any
// prefill/decode schedule of a request gives bit-identical logits on the GPU.
// Speculative verification: a chunk's trailing rows' logits (LogitsRows::kTail); rolling back
// rejected tokens is starting the next chunk at the kept length (the rings are indexed by position
// with a slack of 16 rows, the entry lists' counts follow the length). The MTP layer (paged mode,
// CudaModelOptions::mtp) runs inside every forward over the rows whose next token it knows and
// drafts with DraftMtp.
// One thread at a time (it owns a CUDA stream).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/runtime.h"
#include "base/status.h"
#include "cache/memory_planner.h"
#include "cache/state_layout.h"
#include "io/deepseek_v41_config.h"
#include "io/model_config.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/weights.h"
#include "model/language_model.h"

namespace dsinfer::distributed {
class Communicator;
class ExpertPlacement;
}  // namespace dsinfer::distributed

namespace dsinfer::model::deepseek_v4::cuda {

struct CudaModelOptions {
  int max_seqs = 4;          // state slots
  int64_t max_len = 4096;    // tokens per request (state capacity)
  int64_t max_tokens = 512;  // rows per forward call
  bool all_logits = true;  // size the logits buffer for every row (else logits_per_seq per request)
  int64_t logits_per_seq = 1;  // !all_logits: logits rows per sequence (1 + speculative drafts)
  // The engine's mode: no slots of its own; the state lives in pools shaped by the engine cache's
  // memory plan (UsePagedState) and every forward names each sequence's pages (ForwardPaged).
  // max_seqs is then the most sequences of one step.
  bool paged = false;
  // The bf16 linears — the head, the compressors' projections, the router's gate (tc_gate),
  // DeepSeek-V4.1's Engram projection — on the tensor cores (backend/cuda/bf16_tc_linear.cuh:
  // fp32-exact operands split into bf16 parts, at every row count); false: the CUDA-core GEMV /
  // linear. A numerics choice, not a kernel variant: the logits' bits differ between the two (each
  // batch invariant).
  bool tc_bf16 = true;
  // With tc_bf16: the MoE router's gate (bf16, experts x hidden) on the tensor cores too, at every
  // row count (at prefill the CUDA-core linear re-reads x once per 4 gate rows: 15.6 ms of the
  // flash-l8 8,192-token prefill, docs/perf.md session 34). Another numerics choice (the router
  // logits' bits differ; each batch invariant).
  bool tc_gate = true;
  // DeepSeek-V4.1: the Engram tables in pinned host memory, each lookup's rows read by the gather
  // kernel over PCIe (a step reads ~6 KB a token), instead of device memory: the release's two
  // ~98 GB FP8 tables fit no GPU. The same bits either way.
  bool engram_host_tables = false;
  // Paged mode: decode steps (one token per sequence) and steps of at most graph_tokens_per_seq
  // tokens per sequence (speculative verify steps) replay CUDA graphs captured per step size (off:
  // every step launches eagerly; the same bits either way).
  bool graphs = true;
  int64_t graph_tokens_per_seq = 1;  // 1 + the most speculative tokens of a verify step
  // Load: called as weights reach the device (bytes so far, the checkpoint's tensor bytes).
  std::function<void(int64_t done, int64_t total)> on_load_progress;
  // The independent chains of a layer on branch streams (off: one stream, for A/B timing; the
  // same bits either way).
  bool branches = true;
  // Paged mode: load the checkpoint's MTP layer (mtp.0.*; NotFound without one). Every forward
  // then also runs it over its rows shifted by one position (row i of a chunk pairs the main
  // streams of position start + i - 1 with token i; the first row's streams come from the
  // sequence's streams ring, StateLayoutFor(config, true)), so that its state follows the main
  // model's to one position short, and DraftMtp drafts from there.
  bool mtp = false;
  // DeepSeek-V4: the FP8-instruction numerics mode (deepseek_v4::ModelOptions::fp8_mma, its CPU
  // reference): the FP8 / FP4 linears multiply the operands' e4m3 codes on wgmma .e4m3 and
  // promote each 128-column chain (backend/cuda/fp8mma_linear.cuh), instead of the exact products
  // of the default kernels. Other bits than the default, each batch invariant.
  bool fp8_mma = false;
  // DeepSeek-V4.1: load the DSpark drafter (mtp.*; InvalidArgument for a config without draft
  // layers, NotFound for a checkpoint without them). Every forward then also writes the stages'
  // context rows (the taps of the target layers' inputs, main_proj, main_norm, each stage's K=V)
  // into the rings of the state layout, and DraftDSpark drafts a block after a sequence.
  bool dspark = false;
  // DeepSeek-V4: the attention state's rounding (io::KvCacheDtype, set into config(); kAuto:
  // kFloat32). kFp8 rounds as the CPU's FP8 cache (fp8_sim'd K=V with bf16 RoPE dims, the
  // indexer's Hadamard + fp4_sim) and stores its packed rows (WindowFormat, IndexKeyFormat).
  // DeepSeek-V4.1 always rounds its own way (kFloat32 refused).
  io::KvCacheDtype kv_cache_dtype = io::KvCacheDtype::kAuto;
};

class CudaModel {
 public:
  // Loads a model dir (official or save_pretrained names, any supported format). holds: only the
  // routed experts it accepts (expert parallelism, DeepSeek-V4 only; the others stay off the
  // device and their pointers null).
  static StatusOr<std::unique_ptr<CudaModel>> Load(const std::string& model_dir,
                                                   const CudaModelOptions& options,
                                                   const ExpertFilter& holds = {});
  // Random weights in the official formats (FP8 dense, FP4 experts, BF16 embed/head/compressors),
  // generated on the device by a counter-based hash: the benchmark path without a model dir.
  static StatusOr<std::unique_ptr<CudaModel>> CreateRandom(const io::DeepseekV4Config& config,
                                                           uint64_t seed,
                                                           const CudaModelOptions& options);
  // DeepSeek-V4.1 with device-random weights in the release formats (the benchmark path).
  static StatusOr<std::unique_ptr<CudaModel>> CreateRandomV41(const io::DeepseekV41Config& config,
                                                              uint64_t seed,
                                                              const CudaModelOptions& options);
  ~CudaModel();
  // The DeepSeek-V4.1 config of a V4.1 model, else null.
  const io::DeepseekV41Config* v41_config() const;

  // The V4 config, or for a DeepSeek-V4.1 model the V4 view of its shared parts (dims, mHC, MoE).
  const io::DeepseekV4Config& config() const;
  // What the engine needs of the model, whatever its family.
  model::ModelInfo info() const;
  // The layout of a sequence's state (StateLayoutFor for V4, with the MTP streams when loaded;
  // DeepSeek-V4.1's own streams in fp32 rows).
  cache::StateLayout state_layout() const;

  // Logits left on the device by a forward.
  struct DeviceLogits {
    const float* data = nullptr;  // [rows, vocab] fp32, device memory
    int64_t rows = 0;
  };

  // The layout of a sequence's state on the GPU (the rings keep a rollback slack of 16 rows): the
  // spec the engine's cache plans its pools over.
  // mtp: with the MTP drafter's streams ring (CudaModelOptions::mtp).
  static cache::StateLayout StateLayoutFor(const io::DeepseekV4Config& config, bool mtp = false);
  static constexpr int kMaxRollback = 16;  // the rings' rollback slack (speculative tokens)

  // Paged mode (CudaModelOptions::paged): allocates one device pool per pool of `plan`
  // (cache::PlanMemory over StateLayoutFor(config())), once, before the first ForwardPaged.
  Status UsePagedState(const cache::MemoryPlan& plan);
  struct PagedChunk {
    int64_t start = 0;                               // the sequence's length before the chunk
    std::vector<int32_t> ids;                        // appended at start, start + 1, ...
    std::vector<const std::vector<int32_t>*> pages;  // per pool: the sequence's pages, in order,
                                                     // at least plan.PagesAt(start + ids.size())
    int64_t logits_tail = 1;                         // LogitsRows::kTail: trailing rows' logits
    // >= 0: the last id is entry `feed` of the feed source (SetFeedSource), read on the device
    // when the forward runs (ids.back() is a placeholder).
    int feed = -1;
  };
  // Runs the chunks (at most max_seqs) with their state in the given pages; the logits stay on the
  // device as ForwardToDevice's. Returns once the step is enqueued; the host buffers it filled are
  // reused by the next call, which first waits for this one's uploads (not for its forward).
  StatusOr<DeviceLogits> ForwardPaged(const std::vector<PagedChunk>& chunks, LogitsRows rows);
  // Paged mode with graphs: captures the decode-step graphs of every batch size up to max_seqs,
  // and with graph_tokens_per_seq > 1 the verify-step graphs of every batch size with that many
  // tokens per sequence, now (engine startup) instead of at each size's first step. Other
  // multi-token sizes are captured at their first step.
  Status CaptureDecodeGraphs();
  // Steps replayed from graphs so far: of one token per sequence, of several.
  struct GraphReplays {
    int64_t decode = 0;
    int64_t multi_token = 0;
    int64_t dspark = 0;  // DraftDSpark's passes replayed as a graph
  };
  GraphReplays graph_replays() const;
  // Paged mode: the device ids that PagedChunk::feed indexes (a sampler's output, written by work
  // enqueued on stream() before the forward that reads it). Set once, before the first forward.
  void SetFeedSource(const int32_t* ids);
  // MTP drafting (CudaModelOptions::mtp): per sequence, the MTP layer's row at length - 1 (the
  // main streams kept there, paired with next_token), then count - 1 more rows chained on its own
  // outputs; the drafts are each row's greedy token (ties to the smallest id), as
  // ModelRunner::DraftMtp says. The chained rows' state is overwritten by the next forward, which
  // runs the MTP layer from position length - 1 again. When every sequence wants the same count
  // the levels chain on the device (each level's tokens fed from the last one's argmax), as one
  // graph per (rows, levels) (CudaModelOptions::graphs); the host waits once for the ids.
  struct MtpDraft {
    std::vector<const std::vector<int32_t>*> pages;  // per pool, as PagedChunk::pages
    int64_t length = 0;                              // the sequence's length (>= 1)
    int32_t next_token = 0;
    int count = 1;
  };
  bool has_mtp() const;
  StatusOr<std::vector<std::vector<int32_t>>> DraftMtp(const std::vector<MtpDraft>& drafts);
  // DSpark drafting (CudaModelOptions::dspark): per request the drafter's block after the
  // sequence (its B = dspark_block_size slots at positions length .. length + B - 1, the first
  // the anchor, the rest the noise token), as the CPU model's Model::DraftDSpark: each slot's
  // greedy draft (the Markov term of the previous token added; ties to the smallest id) and the
  // confidence head's logit. The state does not change. One host wait.
  struct DSparkRequest {
    // Paged mode: per pool the sequence's pages (as PagedChunk::pages) and its length; slot mode:
    // the slot (its length is the slot's).
    std::vector<const std::vector<int32_t>*> pages;
    int64_t length = 0;
    int slot = -1;
    int32_t anchor = 0;
  };
  struct DSparkBlock {
    std::vector<int32_t> ids;       // [B]
    std::vector<float> confidence;  // [B] logits (the acceptance probability is their sigmoid)
  };
  bool has_dspark() const;
  StatusOr<std::vector<DSparkBlock>> DraftDSpark(const std::vector<DSparkRequest>& requests);
  // Copies pages [0, count) of one page list of pool `pool` onto another (n > 1 forks), enqueued.
  void CopyPages(size_t pool, const std::vector<int32_t>& from, const std::vector<int32_t>& to,
                 int64_t count);
  // The prefix cache's host tier, enqueued on stream(): pages [0, count) of page list `pages` of
  // pool `pool` to `host` (page-locked memory of count whole pages, in list order), and back.
  // Runs of consecutive page ids go as one copy.
  void CopyPagesToHost(size_t pool, const std::vector<int32_t>& pages, int64_t count, float* host);
  void CopyPagesFromHost(size_t pool, const float* host, const std::vector<int32_t>& pages,
                         int64_t count);

  // Expert parallelism (DeepSeek-V4, slot mode, eager forwards; cuda_expert_parallel.h runs a
  // group): this model is rank comm->rank() of comm's group, layer l's routed experts placed by
  // (*placements)[l], of which it holds its own (Load's `holds`). In every MoE layer of every
  // forward it routes its rows on the device, copies the pairs and rows to the host, exchanges
  // them with the other ranks (two all-to-alls: the rows out, the outputs back), runs its experts
  // over the rows it received and puts the answers where its own experts' outputs would be; the
  // combine is unchanged, so the logits are the single model's bit for bit (every expert kernel
  // gives a row the bits it gives the row alone). Every rank of the group runs each forward (or
  // ForwardIdle) together. A forward this rank refuses, or whose exchange fails, aborts the group
  // (make it anew); after a failed exchange the forward's sequences are part-advanced and must not
  // run again. InvalidArgument when the placements do not fit the model; a model loaded with an
  // expert filter runs only in its group, and not DecodeStep (Unimplemented: its graph).
  struct ExpertParallelRank {
    distributed::Communicator* comm = nullptr;
    const std::vector<distributed::ExpertPlacement>* placements = nullptr;
  };
  Status SetExpertParallel(const ExpertParallelRank& rank);
  // Expert parallelism: this rank's part in a forward of the group in which it has no rows (its
  // experts serve the other ranks' rows in every MoE layer).
  Status ForwardIdle();

  // Slot mode. A free state slot (reset to length 0), or ResourceExhausted.
  StatusOr<int> NewSequence();
  void FreeSequence(int slot);
  // Copies slot `from`'s state (every layer's rings and entry lists, and its length) into slot
  // `to` (in use): n > 1 completions fork from their prompt's state.
  void CopySequence(int from, int to);
  int64_t length(int slot) const;
  // Slot mode: back to the slot's first `length` tokens (at most kMaxRollback fewer): rejected
  // speculative tokens.
  Status Rollback(int slot, int64_t length);

  struct Chunk {
    int slot = 0;
    std::vector<int32_t> ids;  // appended at positions length(slot) ...
  };
  // Runs the chunks (each slot at most once) and returns fp32 logits [rows, vocab] on the host.
  StatusOr<std::vector<float>> Forward(const std::vector<Chunk>& chunks, LogitsRows rows);
  // Whether Forward would take these chunks (the checks it makes before it launches anything):
  // an expert-parallel group checks every rank's before any rank starts.
  Status CheckForward(const std::vector<Chunk>& chunks, LogitsRows rows) const;
  // The same forward, its logits left on the device: enqueued on stream(), nothing waited for.
  // The rows stay valid until the next forward or decode step.
  StatusOr<DeviceLogits> ForwardToDevice(const std::vector<Chunk>& chunks, LogitsRows rows);
  // The stream every forward runs on (samplers enqueue behind it).
  backend::cuda::StreamHandle stream() const;

  // One decode token per slot, greedy-sampled on the device; only the sampled ids come back.
  // With use_graph, the step is captured on its first call for this batch size and replayed.
  StatusOr<std::vector<int32_t>> DecodeStep(const std::vector<int>& slots,
                                            const std::vector<int32_t>& ids, bool use_graph);

  // The fp32 logits [rows, vocab] the last DecodeStep sampled from (rows <= its batch; copied
  // back, synchronizes): tests compare graph-replayed steps with eager ones bit for bit.
  std::vector<float> LastDecodeLogits(int rows);

  // One eager decode step with device-time marks: (op group, ms summed over layers).
  std::vector<std::pair<std::string, double>> ProfileDecodeStep(const std::vector<int>& slots,
                                                                const std::vector<int32_t>& ids);
  // One eager forward of the chunks (slot mode, the last row's logits) with the same marks.
  std::vector<std::pair<std::string, double>> ProfileForward(const std::vector<Chunk>& chunks);

  // Benchmark support: fills the slot's state with random entries as if `length` tokens had been
  // processed (values are synthetic; shapes, bytes and visibility are those of a real request).
  Status FillSyntheticState(int slot, int64_t length, uint64_t seed);

  // Bytes of weights on the device: all of them, and those of one routed expert of one layer.
  size_t weight_bytes() const;
  size_t dense_weight_bytes_per_step() const;  // every weight read once per step except routed experts
  size_t expert_bytes() const;
  // Distinct routed experts used by each layer in the last forward (reads back a few ints).
  std::vector<int> LastActiveExperts();

  struct Impl;  // opaque (cuda_model.cc)

 private:
  explicit CudaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsinfer::model::deepseek_v4::cuda
