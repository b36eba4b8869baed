// The CPU ModelRunner: any model family behind the family seam (model/language_model.h: DeepSeek-V4
// or DeepSeek-V4.1, picked by the model dir's config), with per-sequence states bound to the state
// cache's pages. With the MTP drafter on (a family with an MTP layer), it keeps each sequence's
// main-model streams of the rows its MTP layer has not seen yet, and runs them when asked for
// drafts. The host tier's offloaded states are heap copies in the cache's page geometry.
#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/check.h"
#include "executor/model_runner.h"
#include "model/model_loader.h"

namespace dsinfer::executor {

namespace {

// An offloaded state's rows: the pages a state of `length` tokens holds in the cache's plan, in
// the same geometry, in one heap allocation.
class HostPages final : public cache::StatePages {
 public:
  HostPages(const cache::MemoryPlan& plan, int64_t length) {
    int64_t floats = 0;
    for (const cache::PoolPlan& pool : plan.pools) {
      rows_per_page_.push_back(pool.rows_per_page);
      pages_.push_back(pool.PagesAt(length));
      page_floats_.push_back(pool.page_bytes() / static_cast<int64_t>(sizeof(float)));
      offsets_.push_back(floats);
      floats += pages_.back() * page_floats_.back();
    }
    floats_ = floats;
    data_.reset(new float[static_cast<size_t>(floats)]);
  }
  int64_t rows_per_page(int component) const override { return rows_per_page_[component]; }
  float* Page(int component, int64_t index) override {
    DSINFER_CHECK_MSG(index < pages_[component], "row beyond the offloaded length");
    return data_.get() + offsets_[component] + index * page_floats_[component];
  }
  int64_t bytes() const { return floats_ * static_cast<int64_t>(sizeof(float)); }

 private:
  std::vector<int64_t> rows_per_page_, pages_, page_floats_, offsets_;
  int64_t floats_ = 0;
  std::unique_ptr<float[]> data_;
};

// The CPU runner's offloaded state: a sequence of the model on HostPages (its rows and positions
// copied by the family's CopyFrom) and its MTP layer's unseen rows.
class CpuHostState final : public HostState {
 public:
  CpuHostState(const cache::MemoryPlan& plan, int64_t length) : pages(plan, length) {}
  int64_t bytes() const override {
    return pages.bytes() + static_cast<int64_t>(pending_streams.size() * sizeof(float) +
                                                pending_tokens.size() * sizeof(int32_t));
  }
  int64_t length() const override { return state->length(); }

  HostPages pages;
  std::unique_ptr<model::ModelSequence> state;  // on `pages`
  std::vector<float> pending_streams;
  std::vector<int32_t> pending_tokens;
};

class CpuModelRunner final : public ModelRunner {
 public:
  CpuModelRunner(std::unique_ptr<model::LanguageModel> model, const RunnerOptions& options)
      : model_(std::move(model)),
        slack_(std::max(options.max_draft_tokens, options.max_rollback)),
        mtp_(options.mtp),
        layout_(model_->StateLayoutFor(slack_)) {}

  const model::ModelInfo& info() const override { return model_->info(); }
  const model::ExpertParallelStats* expert_parallel_stats() const override {
    return model_->expert_parallel_stats();
  }
  const cache::StateLayout& state_layout() const override { return layout_; }
  Status BindCache(cache::StateCache* cache) override {
    cache_ = cache;
    return Status::Ok();
  }

  Status Launch(const std::vector<RunChunk>& chunks, const std::vector<int64_t>& tails) override {
    DSINFER_CHECK(cache_ != nullptr && tails.size() == chunks.size());
    // The forward runs here and now; its logits wait for Sample. A fed token is the previous
    // Sample's draw, collected already on the CPU.
    std::vector<RunChunk> resolved;
    const std::vector<RunChunk>* run = &chunks;
    if (std::any_of(chunks.begin(), chunks.end(), [](const RunChunk& c) { return c.feed >= 0; })) {
      resolved = chunks;
      for (RunChunk& ch : resolved) {
        if (ch.feed < 0) continue;
        DSINFER_CHECK(!ch.tokens.empty() && ch.feed < static_cast<int>(last_ids_.size()));
        ch.tokens.back() = last_ids_[static_cast<size_t>(ch.feed)];
      }
      run = &resolved;
    }
    std::vector<model::ModelChunk> batch;
    batch.reserve(chunks.size());
    counts_.clear();
    for (size_t i = 0; i < run->size(); ++i) {
      const RunChunk& ch = (*run)[i];
      Seq& seq = seqs_[ch.seq];
      // The state's rows live in the pages the scheduler reserved for this sequence.
      if (!seq.state) seq.state = model_->NewSequence(slack_, layout_, cache_->Pages(ch.seq));
      DSINFER_CHECK(seq.state->length() == ch.start);
      batch.push_back({seq.state.get(), ch.tokens, tails[i]});
      counts_.push_back(static_cast<int64_t>(ch.tokens.size()));
    }
    DSINFER_ASSIGN_OR_RETURN(model::ModelOutput out, model_->Forward(batch, /*keep_streams=*/mtp_));
    if (mtp_) DSINFER_RETURN_IF_ERROR(KeepStreams(*run, tails, out.streams));
    logits_ = std::move(out.logits);
    tails_ = tails;
    return Status::Ok();
  }

  Status Sample(const std::vector<RunDraw>& draws) override {
    DSINFER_CHECK(!sampled_);
    const std::vector<int64_t> rows = DrawLogitsRows(counts_, draws, tails_);
    const int64_t vocab = model_->info().vocab_size;
    sampled_ = true;
    output_.tokens.clear();
    output_.tokens.reserve(draws.size());
    last_ids_.clear();
    for (size_t i = 0; i < draws.size(); ++i) {
      output_.tokens.push_back(
          sampler_.Sample(logits_.data() + rows[i] * vocab, vocab, draws[i].input));
      last_ids_.push_back(output_.tokens.back().id);
    }
    return Status::Ok();
  }

  StatusOr<RunOutput> Collect() override {
    DSINFER_CHECK(sampled_);
    sampled_ = false;
    return std::move(output_);
  }

  void Release(scheduler::SeqId seq) override { seqs_.erase(seq); }

  Status Rollback(scheduler::SeqId id, int64_t length) override {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return NotFound("rollback of a sequence without state");
    Seq& seq = it->second;
    DSINFER_RETURN_IF_ERROR(
        Unshare(id, has_mtp() ? std::min(length, seq.state->mtp_length()) : length));
    DSINFER_RETURN_IF_ERROR(seq.state->Rollback(length));
    seq.TrimPending(length);
    return Status::Ok();
  }

  void Fork(scheduler::SeqId parent, scheduler::SeqId child) override {
    const Seq& from = seqs_.at(parent);
    Seq& to = seqs_[child];
    to.state = model_->NewSequence(slack_, layout_, cache_->Pages(child));
    to.state->CopyFrom(*from.state);  // a row on a shared page is where it is: not copied
    to.pending_streams = from.pending_streams;
    to.pending_tokens = from.pending_tokens;
  }

  int64_t ShareableLength(scheduler::SeqId id, int64_t length) const override {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return 0;
    const model::ModelSequence& state = *it->second.state;
    // The MTP layer writes its rows from its own length on (its unseen rows).
    int64_t final_length = std::min(length, state.length());
    if (has_mtp()) final_length = std::min(final_length, state.mtp_length());
    return std::max<int64_t>(0, final_length);
  }

  void Rename(scheduler::SeqId from, scheduler::SeqId to) override {
    auto node = seqs_.extract(from);
    DSINFER_CHECK(!node.empty() && !seqs_.count(to));
    node.key() = to;
    seqs_.insert(std::move(node));
  }

  StatusOr<std::unique_ptr<HostState>> Offload(scheduler::SeqId id) override {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return NotFound("offload of a sequence without state");
    const Seq& seq = it->second;
    auto host = std::make_unique<CpuHostState>(cache_->plan(), seq.state->length());
    host->state = model_->NewSequence(slack_, layout_, &host->pages);
    host->state->CopyFrom(*seq.state);
    host->pending_streams = seq.pending_streams;
    host->pending_tokens = seq.pending_tokens;
    return std::unique_ptr<HostState>(std::move(host));
  }

  Status Restore(const HostState& state, scheduler::SeqId id) override {
    const auto* host = dynamic_cast<const CpuHostState*>(&state);
    DSINFER_CHECK(host != nullptr && !seqs_.count(id));
    DSINFER_CHECK(cache_->reserved_length(id) >= host->length());
    Seq& to = seqs_[id];
    to.state = model_->NewSequence(slack_, layout_, cache_->Pages(id));
    to.state->CopyFrom(*host->state);
    to.pending_streams = host->pending_streams;
    to.pending_tokens = host->pending_tokens;
    return Status::Ok();
  }

  size_t num_sequences() const override { return seqs_.size(); }

  bool has_mtp() const override { return mtp_ && model_->SupportsMtp().ok(); }
  bool has_dspark() const override { return model_->SupportsDSpark().ok(); }

  StatusOr<std::vector<model::BlockDraft>> DraftDSpark(
      const std::vector<MtpDraftRequest>& requests) override {
    if (!has_dspark()) return ModelRunner::DraftDSpark(requests);
    std::vector<model::DSparkChunk> batch;
    batch.reserve(requests.size());
    for (const MtpDraftRequest& r : requests)
      batch.push_back({seqs_.at(r.seq).state.get(), r.next_token});
    return model_->DraftDSpark(batch);
  }

  StatusOr<std::vector<std::vector<int32_t>>> DraftMtp(
      const std::vector<MtpDraftRequest>& requests) override {
    if (!has_mtp()) return ModelRunner::DraftMtp(requests);
    const int64_t hcD = model_->stream_width();
    // 1. Catch up: every unseen row, the last paired with the freshly drawn token.
    std::vector<model::MtpChunk> batch;
    for (const MtpDraftRequest& r : requests) {
      Seq& seq = seqs_.at(r.seq);
      const int64_t rows = static_cast<int64_t>(seq.pending_tokens.size());
      if (rows == 0 || seq.state->mtp_length() + rows != seq.state->length()) {
        return Internal("MTP drafting: the sequence's unseen rows do not end at its length");
      }
      std::vector<int32_t> next(seq.pending_tokens.begin() + 1, seq.pending_tokens.end());
      next.push_back(r.next_token);
      batch.push_back({seq.state.get(), std::move(seq.pending_streams), std::move(next)});
      seq.pending_streams.clear();
      seq.pending_tokens.clear();
    }
    std::vector<std::vector<int32_t>> drafts(requests.size());
    std::vector<int64_t> lengths;
    std::vector<model::ModelSequence*> states;
    for (const auto& ch : batch) {
      lengths.push_back(ch.seq->length());
      states.push_back(ch.seq);
    }
    // 2. Draft; requests that want more chain their last row's MTP streams and draft back in.
    const int64_t vocab = model_->info().vocab_size;
    std::vector<size_t> active(requests.size());
    for (size_t i = 0; i < active.size(); ++i) active[i] = i;
    while (!active.empty()) {
      DSINFER_ASSIGN_OR_RETURN(model::ModelOutput out, model_->ForwardMtp(batch));
      std::vector<model::MtpChunk> next_batch;
      std::vector<size_t> next_active;
      int64_t row_end = 0;
      for (size_t b = 0; b < batch.size(); ++b) {
        row_end += static_cast<int64_t>(batch[b].next_ids.size());
        const size_t i = active[b];
        const float* logits = out.logits.data() + static_cast<int64_t>(b) * vocab;
        const auto id = static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
        drafts[i].push_back(id);
        if (static_cast<int>(drafts[i].size()) < requests[i].count) {
          const float* x = out.streams.data() + (row_end - 1) * hcD;
          next_batch.push_back({batch[b].seq, std::vector<float>(x, x + hcD), {id}});
          next_active.push_back(i);
        }
      }
      batch = std::move(next_batch);
      active = std::move(next_active);
    }
    // 3. Drop the chained rows: the MTP state ends where the main model's does.
    for (size_t i = 0; i < states.size(); ++i) {
      DSINFER_RETURN_IF_ERROR(states[i]->RollbackMtp(lengths[i]));
    }
    return drafts;
  }

 private:
  // Copy-on-write before `id` rewrites its rows from `length` tokens on: its shared pages there
  // become its own copies.
  Status Unshare(scheduler::SeqId id, int64_t length) {
    DSINFER_ASSIGN_OR_RETURN(const std::vector<cache::PageCopy> copies,
                             cache_->Unshare(id, length));
    for (const cache::PageCopy& c : copies) {
      std::memcpy(cache_->PageData(c.pool, c.to), cache_->PageData(c.pool, c.from),
                  static_cast<size_t>(cache_->plan().pools[c.pool].page_bytes()));
    }
    return Status::Ok();
  }

  struct Seq {
    std::unique_ptr<model::ModelSequence> state;
    // MTP: the main streams [rows, hc, D] and tokens of the rows [mtp_length, length).
    std::vector<float> pending_streams;
    std::vector<int32_t> pending_tokens;
    void TrimPending(int64_t length) {
      const int64_t keep = std::max<int64_t>(0, length - state->mtp_length());
      if (static_cast<int64_t>(pending_tokens.size()) <= keep) return;
      const size_t row = pending_streams.size() / std::max<size_t>(1, pending_tokens.size());
      pending_tokens.resize(static_cast<size_t>(keep));
      pending_streams.resize(static_cast<size_t>(keep) * row);
    }
  };

  // MTP: keeps the rows of this run as the sequences' unseen rows; a chunk that nothing draws
  // from (a prefill chunk before the prompt's end) has the MTP layer catch up at once on all its
  // rows but the last, whose next token is the next chunk's first.
  Status KeepStreams(const std::vector<RunChunk>& chunks, const std::vector<int64_t>& tails,
                     const std::vector<float>& streams) {
    const int64_t hcD = model_->stream_width();
    int64_t row = 0;
    std::vector<model::MtpChunk> catch_up;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const RunChunk& ch = chunks[i];
      const auto count = static_cast<int64_t>(ch.tokens.size());
      Seq& seq = seqs_.at(ch.seq);
      seq.pending_streams.insert(seq.pending_streams.end(), streams.begin() + row * hcD,
                                 streams.begin() + (row + count) * hcD);
      seq.pending_tokens.insert(seq.pending_tokens.end(), ch.tokens.begin(), ch.tokens.end());
      row += count;
      const auto rows = static_cast<int64_t>(seq.pending_tokens.size());
      if (tails[i] > 0 || rows < 2) continue;
      std::vector<int32_t> next(seq.pending_tokens.begin() + 1, seq.pending_tokens.end());
      catch_up.push_back(
          {seq.state.get(),
           std::vector<float>(seq.pending_streams.begin(), seq.pending_streams.end() - hcD),
           std::move(next)});
      seq.pending_streams.erase(seq.pending_streams.begin(), seq.pending_streams.end() - hcD);
      seq.pending_tokens.erase(seq.pending_tokens.begin(), seq.pending_tokens.end() - 1);
    }
    if (catch_up.empty()) return Status::Ok();
    return model_->ForwardMtp(catch_up).status();
  }

  std::unique_ptr<model::LanguageModel> model_;
  int slack_ = 0;
  bool mtp_ = false;
  cache::StateLayout layout_;
  cache::StateCache* cache_ = nullptr;
  sampler::Sampler sampler_;
  std::unordered_map<scheduler::SeqId, Seq> seqs_;
  // The launched step's logits (its chunks' sizes and tails) and the last Sample's draws.
  std::vector<float> logits_;
  std::vector<int64_t> counts_, tails_;
  RunOutput output_;
  bool sampled_ = false;           // output_ awaits Collect
  std::vector<int32_t> last_ids_;  // the last Sample's ids (fed tokens)
};

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const RunnerOptions& options) {
  model::LoadOptions lo;
  lo.num_threads = options.num_threads;
  lo.dspark = options.dspark;
  lo.kv_cache_dtype = options.kv_cache_dtype;
  lo.expert_parallel = options.expert_parallel;
  lo.eplb_redundant_experts = options.eplb_redundant_experts;
  lo.eplb_interval = options.eplb_interval;
  auto loaded = model::LoadLanguageModel(options.model_dir, lo);
  if (!loaded.ok() && options.dspark) {
    return Status(loaded.status().code(),
                  "DSpark speculative decoding: " + loaded.status().message() +
                      " (model: " + options.model_dir + ")");
  }
  DSINFER_ASSIGN_OR_RETURN(auto model, std::move(loaded));
  if (Status st = options.mtp      ? model->SupportsMtp()
                  : options.dspark ? model->SupportsDSpark()
                                   : Status::Ok();
      !st.ok()) {
    return Status(st.code(), st.message() + " (model: " + options.model_dir + ")");
  }
  return std::unique_ptr<ModelRunner>(new CpuModelRunner(std::move(model), options));
}

}  // namespace dsinfer::executor
