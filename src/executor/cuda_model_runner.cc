// The CUDA ModelRunner: model/deepseek_v4/cuda's CudaModel in paged mode. Every sequence's state
// lives in device pools shaped by the engine cache's memory plan, in the pages the cache assigns
// (StateCache::PageTable): admission, preemption and forks are the cache's, as on the CPU. The
// draws run on the device (CudaSampler) behind the forward: only sampled ids and logprobs come back
// to the host, asynchronously (Collect waits for them), and a fed token is read by the next
// forward straight from the sampler's device output. The host tier's offloaded states are pinned
// copies of a sequence's pages (page copies enqueued on the model's stream); when the OS refuses
// to pin more, the offload is refused (the engine drops the state). Forks and prefix cache copies
// copy only the pages they do not share (StateCache::Share). CUDA builds only.
#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/cuda/runtime.h"
#include "base/check.h"
#include "executor/cuda_sampler.h"
#include "executor/model_runner.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/language_model.h"
#include "model/deepseek_v41/init_presets.h"

namespace dsinfer::executor {

namespace {

namespace mdl = model::deepseek_v4;
namespace mdl41 = model::deepseek_v41;
using mdl::cuda::CudaModel;

// Pinned memory whose last copy may still be running, and the event behind that copy.
struct PendingHostCopy {
  backend::cuda::PinnedBuffer memory;
  std::unique_ptr<backend::cuda::Event> done;
};
using RetiredCopies = std::vector<PendingHostCopy>;

// The CUDA runner's offloaded state: its pages of every pool, in pool order, in pinned host
// memory, and its length. Destroyed while a copy to or from it is still queued (a kept state
// restored just now), the memory goes to the runner's retired list, freed once the copy has run.
class CudaHostState final : public HostState {
 public:
  // `memory`: pinned, of at least page_bytes_total bytes (see Offload).
  CudaHostState(backend::cuda::PinnedBuffer memory, std::vector<int64_t> pages, int64_t length,
                std::shared_ptr<RetiredCopies> retired)
      : copy_{std::move(memory), std::make_unique<backend::cuda::Event>()},
        pages_(std::move(pages)),
        length_(length),
        retired_(std::move(retired)) {}
  ~CudaHostState() override {
    if (copy_.done && !copy_.done->Query()) retired_->push_back(std::move(copy_));
  }
  int64_t bytes() const override { return static_cast<int64_t>(copy_.memory.bytes()); }
  int64_t length() const override { return length_; }
  float* data() const { return copy_.memory.as<float>(); }
  const std::vector<int64_t>& pages() const { return pages_; }  // per pool
  backend::cuda::Event& done() const { return *copy_.done; }

 private:
  PendingHostCopy copy_;
  std::vector<int64_t> pages_;
  int64_t length_ = 0;
  std::shared_ptr<RetiredCopies> retired_;
};

class CudaModelRunner final : public ModelRunner {
 public:
  CudaModelRunner(std::unique_ptr<CudaModel> model, int max_rollback, int64_t max_draws)
      : model_(std::move(model)),
        max_rollback_(max_rollback),
        sampler_(model_->config().vocab_size, max_draws),
        layout_(model_->state_layout()),
        info_(model_->info()) {
    model_->SetFeedSource(sampler_.device_ids());
  }

  // Pinned memory is not freed under a copy still queued.
  ~CudaModelRunner() override {
    for (const PendingHostCopy& c : *retired_) c.done->Synchronize();
  }

  const model::ModelInfo& info() const override { return info_; }
  const cache::StateLayout& state_layout() const override { return layout_; }

  Status BindCache(cache::StateCache* cache) override {
    cache_ = cache;
    DSINFER_RETURN_IF_ERROR(model_->UsePagedState(cache->plan()));
    // Every decode batch size's graph now, so that no step waits for a capture.
    return model_->CaptureDecodeGraphs();
  }

  int64_t StateMemoryBudget(double gpu_memory_utilization) const override {
    // What the weights, activations and buffers left free, less the share of the whole device the
    // utilization keeps back, less room for the sampler's scratch and the allocator's slack.
    const double total = static_cast<double>(backend::cuda::DeviceTotalBytes());
    const double free = static_cast<double>(backend::cuda::DeviceFreeBytes());
    const double reserve = (1.0 - gpu_memory_utilization) * total + (512.0 * (1 << 20));
    return static_cast<int64_t>(std::max(0.0, free - reserve));
  }

  Status Launch(const std::vector<RunChunk>& chunks, const std::vector<int64_t>& tails) override {
    DSINFER_CHECK(cache_ != nullptr && tails.size() == chunks.size());
    std::vector<CudaModel::PagedChunk> batch(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      const RunChunk& ch = chunks[i];
      auto it = lengths_.find(ch.seq);
      DSINFER_CHECK(it == lengths_.end() ? ch.start == 0 : it->second == ch.start);
      // A fed token is a draw of the previous Sample: the sampler's device ids.
      DSINFER_CHECK(ch.feed < last_draws_);
      batch[i].start = ch.start;
      batch[i].ids = ch.tokens;
      batch[i].logits_tail = tails[i];
      batch[i].feed = ch.feed;
      batch[i].pages = PagesOf(ch.seq);
    }
    DSINFER_ASSIGN_OR_RETURN(logits_, model_->ForwardPaged(batch, mdl::LogitsRows::kTail));
    forward_done_.Record(model_->stream());
    counts_.clear();
    int64_t nrows = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const RunChunk& ch = chunks[i];
      lengths_[ch.seq] = ch.start + static_cast<int64_t>(ch.tokens.size());
      counts_.push_back(static_cast<int64_t>(ch.tokens.size()));
      nrows += tails[i];
    }
    DSINFER_CHECK(logits_.rows == nrows);
    tails_ = tails;
    return Status::Ok();
  }

  Status Sample(const std::vector<RunDraw>& draws) override {
    // The sampler reads draw i from logits row rows[i].chunk.
    const std::vector<int64_t> logits_rows = DrawLogitsRows(counts_, draws, tails_);
    std::vector<RunDraw> rows(draws);
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].chunk = static_cast<int>(logits_rows[i]);
      rows[i].row = -1;
    }
    sampler_.Enqueue(logits_.data, rows, model_->stream());
    last_draws_ = static_cast<int>(draws.size());
    return Status::Ok();
  }

  bool LogitsReady() const override { return forward_done_.Query(); }

  StatusOr<RunOutput> Collect() override {
    RunOutput out;
    out.tokens = sampler_.Collect();
    return out;
  }

  void Release(scheduler::SeqId seq) override { lengths_.erase(seq); }  // the cache frees the pages

  Status Rollback(scheduler::SeqId seq, int64_t length) override {
    // The state's rings are indexed by position and keep kRollbackSlack spare rows, and the entry
    // lists' counts follow the length: the next chunk starting at `length` is the rollback.
    auto it = lengths_.find(seq);
    if (it == lengths_.end()) return NotFound("rollback of a sequence without state");
    if (length < 0 || length > it->second || it->second - length > max_rollback_) {
      return OutOfRange("rollback from " + std::to_string(it->second) + " to " +
                        std::to_string(length) + " tokens exceeds the slack of " +
                        std::to_string(max_rollback_));
    }
    // Copy-on-write: a shared page of rows the next chunks rewrite becomes the sequence's own
    // (the MTP layer's rows run one behind). ShareableLength keeps this from happening.
    DSINFER_ASSIGN_OR_RETURN(const std::vector<cache::PageCopy> copies,
                             cache_->Unshare(seq, std::max<int64_t>(0, length - MtpLag())));
    for (const cache::PageCopy& c : copies) model_->CopyPages(c.pool, {c.from}, {c.to}, 1);
    it->second = length;
    return Status::Ok();
  }

  void Fork(scheduler::SeqId parent, scheduler::SeqId child) override {
    // The parent's state as it is (its rings whole, its lists' pages so far) into the child's
    // pages; a page both share (StateCache::Share) is left where it is.
    for (size_t p = 0; p < cache_->plan().pools.size(); ++p) {
      const std::vector<int32_t>& from = cache_->PageTable(parent, p);
      const std::vector<int32_t>& to = cache_->PageTable(child, p);
      const size_t count = std::min(from.size(), to.size());
      for (size_t k = 0; k < count;) {
        if (from[k] == to[k]) {
          ++k;
          continue;
        }
        size_t end = k + 1;  // a run of unshared pages: one CopyPages
        while (end < count && from[end] != to[end]) ++end;
        const std::vector<int32_t> src(from.begin() + static_cast<std::ptrdiff_t>(k),
                                       from.begin() + static_cast<std::ptrdiff_t>(end));
        const std::vector<int32_t> dst(to.begin() + static_cast<std::ptrdiff_t>(k),
                                       to.begin() + static_cast<std::ptrdiff_t>(end));
        model_->CopyPages(p, src, dst, static_cast<int64_t>(end - k));
        k = end;
      }
    }
    lengths_[child] = lengths_.at(parent);
  }

  int64_t ShareableLength(scheduler::SeqId seq, int64_t length) const override {
    // A list row is written once, by the forward whose chunk holds its last position (the MTP
    // layer's a row later).
    auto it = lengths_.find(seq);
    if (it == lengths_.end()) return 0;
    return std::max<int64_t>(0, std::min(length, it->second) - MtpLag());
  }

  void Rename(scheduler::SeqId from, scheduler::SeqId to) override {
    auto node = lengths_.extract(from);
    DSINFER_CHECK(!node.empty() && !lengths_.count(to));
    node.key() = to;
    lengths_.insert(std::move(node));
  }

  bool has_mtp() const override { return model_->has_mtp(); }

  StatusOr<std::vector<std::vector<int32_t>>> DraftMtp(
      const std::vector<MtpDraftRequest>& requests) override {
    if (!has_mtp()) return ModelRunner::DraftMtp(requests);
    // Every forward ran the MTP layer up to each sequence's second-last row: what is left is the
    // last row (with the drawn token) and the chained drafts.
    std::vector<CudaModel::MtpDraft> drafts(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const MtpDraftRequest& r = requests[i];
      auto it = lengths_.find(r.seq);
      if (it == lengths_.end()) return NotFound("MTP drafting for a sequence without state");
      drafts[i].length = it->second;
      drafts[i].next_token = r.next_token;
      drafts[i].count = r.count;
      drafts[i].pages = PagesOf(r.seq);
    }
    return model_->DraftMtp(drafts);
  }

  bool has_dspark() const override { return model_->has_dspark(); }

  StatusOr<std::vector<model::BlockDraft>> DraftDSpark(
      const std::vector<MtpDraftRequest>& requests) override {
    if (!has_dspark()) return ModelRunner::DraftDSpark(requests);
    // Every forward wrote the drafter's context rows into the sequence's rings: the block reads
    // the last W of them.
    std::vector<CudaModel::DSparkRequest> batch(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const MtpDraftRequest& r = requests[i];
      auto it = lengths_.find(r.seq);
      if (it == lengths_.end()) return NotFound("DSpark drafting for a sequence without state");
      batch[i].length = it->second;
      batch[i].anchor = r.next_token;
      batch[i].pages = PagesOf(r.seq);
    }
    DSINFER_ASSIGN_OR_RETURN(std::vector<CudaModel::DSparkBlock> blocks,
                             model_->DraftDSpark(batch));
    std::vector<model::BlockDraft> out(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      out[i].ids = std::move(blocks[i].ids);
      for (const float z : blocks[i].confidence) {
        out[i].accept_prob.push_back(1.0f / (1.0f + std::exp(-z)));  // as the CPU model's
      }
    }
    return out;
  }

  StatusOr<std::unique_ptr<HostState>> Offload(scheduler::SeqId seq) override {
    FreeRetiredCopies();
    auto it = lengths_.find(seq);
    if (it == lengths_.end()) return NotFound("offload of a sequence without state");
    // The pages a state of its length holds (a reservation may hold more), behind the forwards
    // that write them.
    const auto& plan = cache_->plan();
    std::vector<int64_t> pages;
    int64_t bytes = 0;
    for (size_t p = 0; p < plan.pools.size(); ++p) {
      pages.push_back(std::min<int64_t>(plan.pools[p].PagesAt(it->second),
                                        static_cast<int64_t>(cache_->PageTable(seq, p).size())));
      bytes += pages.back() * plan.pools[p].page_bytes();
    }
    // Pinned memory the OS refuses (the host's locked-memory limit) refuses the offload: the
    // engine then drops the state instead (a later hit recomputes it), never aborts.
    backend::cuda::PinnedBuffer memory =
        backend::cuda::PinnedBuffer::TryAllocate(static_cast<size_t>(std::max<int64_t>(bytes, 4)));
    if (memory.get() == nullptr) {
      return ResourceExhausted("host tier: cannot pin " + std::to_string(bytes) +
                               " bytes of host memory for an offloaded state");
    }
    auto host =
        std::make_unique<CudaHostState>(std::move(memory), std::move(pages), it->second, retired_);
    float* at = host->data();
    for (size_t p = 0; p < plan.pools.size(); ++p) {
      model_->CopyPagesToHost(p, cache_->PageTable(seq, p), host->pages()[p], at);
      at += host->pages()[p] * (plan.pools[p].page_bytes() / 4);
    }
    host->done().Record(model_->stream());
    return std::unique_ptr<HostState>(std::move(host));
  }

  Status Restore(const HostState& state, scheduler::SeqId seq) override {
    FreeRetiredCopies();
    const auto* host = dynamic_cast<const CudaHostState*>(&state);
    DSINFER_CHECK(host != nullptr && !lengths_.count(seq));
    const auto& plan = cache_->plan();
    const float* at = host->data();
    for (size_t p = 0; p < plan.pools.size(); ++p) {
      const std::vector<int32_t>& to = cache_->PageTable(seq, p);
      if (static_cast<int64_t>(to.size()) < host->pages()[p]) {
        return Internal("restore into fewer pages than the offloaded state holds");
      }
      model_->CopyPagesFromHost(p, at, to, host->pages()[p]);
      at += host->pages()[p] * (plan.pools[p].page_bytes() / 4);
    }
    host->done().Record(model_->stream());
    lengths_[seq] = host->length();
    return Status::Ok();
  }

  size_t num_sequences() const override { return lengths_.size(); }
  int64_t graph_decode_steps() const override { return model_->graph_replays().decode; }
  int64_t graph_multi_token_steps() const override { return model_->graph_replays().multi_token; }
  int64_t graph_draft_passes() const override { return model_->graph_replays().dspark; }

 private:
  std::unique_ptr<CudaModel> model_;
  int max_rollback_ = 0;
  CudaSampler sampler_;
  cache::StateLayout layout_;
  model::ModelInfo info_;
  cache::StateCache* cache_ = nullptr;
  std::unordered_map<scheduler::SeqId, int64_t> lengths_;  // sequences with state: their length
  // The launched step's logits, its chunks' sizes and tails; the last Sample's draws.
  CudaModel::DeviceLogits logits_;
  std::vector<int64_t> counts_, tails_;
  backend::cuda::Event forward_done_;  // recorded behind each launched forward
  int last_draws_ = 0;
  // Offloaded states' pinned memory dropped while a copy was still queued.
  std::shared_ptr<RetiredCopies> retired_ = std::make_shared<RetiredCopies>();
  // The sequence's page list of every pool, as CudaModel's forwards take them.
  std::vector<const std::vector<int32_t>*> PagesOf(scheduler::SeqId seq) const {
    std::vector<const std::vector<int32_t>*> pages;
    for (size_t p = 0; p < cache_->plan().pools.size(); ++p)
      pages.push_back(&cache_->PageTable(seq, p));
    return pages;
  }
  // Tokens the MTP layer's state runs behind the main model's (it sees a row with the next token).
  int64_t MtpLag() const { return model_->has_mtp() ? 1 : 0; }
  void FreeRetiredCopies() {
    std::erase_if(*retired_, [](const PendingHostCopy& c) { return c.done->Query(); });
  }
};

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> CreateCudaModelRunner(const RunnerOptions& o) {
  mdl::cuda::CudaModelOptions opt;
  opt.paged = true;
  opt.graphs = o.cuda_graphs;
  opt.engram_host_tables = o.engram_host_tables;
  opt.on_load_progress = o.load_progress;
  opt.max_seqs = o.max_sequences;
  opt.max_len = o.max_len;
  opt.max_tokens = o.max_tokens;
  opt.all_logits = o.all_logits;
  opt.logits_per_seq = 1 + o.max_draft_tokens;
  opt.graph_tokens_per_seq = 1 + o.max_draft_tokens;
  if (o.max_draft_tokens > mdl::cuda::CudaModel::kMaxRollback) {
    return InvalidArgument("--num-speculative-tokens " + std::to_string(o.max_draft_tokens) +
                           ": the CUDA model's state keeps a rollback slack of " +
                           std::to_string(mdl::cuda::CudaModel::kMaxRollback) + " tokens");
  }
  DSINFER_CHECK(o.max_rollback >= 0 && o.max_rollback <= mdl::cuda::CudaModel::kMaxRollback);
  opt.mtp = o.mtp;
  opt.dspark = o.dspark;
  opt.kv_cache_dtype = o.kv_cache_dtype;
  std::unique_ptr<CudaModel> model;
  if (o.random_preset.empty()) {
    auto loaded = CudaModel::Load(o.model_dir, opt);
    if (!loaded.ok() && o.dspark) {
      return Status(loaded.status().code(),
                    "DSpark speculative decoding: " + loaded.status().message() +
                        " (model: " + o.model_dir + ")");
    }
    DSINFER_ASSIGN_OR_RETURN(model, std::move(loaded));
  } else if (IsV41Preset(o.random_preset)) {
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV41Config cfg, mdl41::PresetConfig(o.random_preset));
    DSINFER_ASSIGN_OR_RETURN(model, CudaModel::CreateRandomV41(cfg, o.random_seed, opt));
  } else {
    DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config cfg, LoadRunnerConfig(o));
    DSINFER_ASSIGN_OR_RETURN(model, CudaModel::CreateRandom(cfg, o.random_seed, opt));
  }
  // Draws per step: a chunk draws at its last 1 + k rows, or n <= 128 times from its last row
  // (a prompt's n completions).
  // With every row's logits (prompt logprobs), a draw may score each row of the step too.
  const int64_t max_draws =
      int64_t{o.max_sequences} * std::max<int64_t>(128, 1 + o.max_draft_tokens) +
      (o.all_logits ? o.max_tokens : 0);
  return std::unique_ptr<ModelRunner>(new CudaModelRunner(
      std::move(model), std::max(o.max_draft_tokens, o.max_rollback), max_draws));
}

}  // namespace dsinfer::executor
