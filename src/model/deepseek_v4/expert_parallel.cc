#include "model/deepseek_v4/expert_parallel.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>
#include <utility>

#include "base/check.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "model/deepseek_v4/language_model.h"
#include "model/deepseek_v4/model.h"

namespace dsinfer::model::deepseek_v4 {

namespace {

constexpr int kMaxRanks = 64;
// EPLB moves a layer's experts only for a plan that lowers its expected imbalance by this much
// (relative): re-planning stable traffic would otherwise shuffle experts for nothing.
constexpr double kMinRebalanceGain = 0.02;

class ExpertParallelModel final : public LanguageModel {
 public:
  static StatusOr<std::unique_ptr<LanguageModel>> Load(const std::string& model_dir,
                                                       const LoadOptions& options);

  const ModelInfo& info() const override { return info_; }
  cache::StateLayout StateLayoutFor(int rollback_slack) const override {
    return DeepseekV4StateLayout(models_[0]->config(), rollback_slack);
  }
  std::unique_ptr<ModelSequence> NewSequence(int rollback_slack, const cache::StateLayout& layout,
                                             cache::StatePages* pages) const override {
    return AsModelSequence(models_[0]->NewSequence(rollback_slack, layout, pages));
  }

  StatusOr<ModelOutput> Forward(const std::vector<ModelChunk>& chunks, bool keep_streams) override {
    std::vector<SequenceChunk> batch;
    batch.reserve(chunks.size());
    for (const ModelChunk& ch : chunks) batch.push_back({StateOf(ch.seq), ch.ids, ch.logits_tail});
    // Refused before any rank starts (a rank that refused alone would leave the others waiting).
    DSINFER_RETURN_IF_ERROR(models_[0]->CheckChunks(batch));
    std::vector<int64_t> tokens, logit_rows;  // a chunk's last min(tokens, tail) rows' logits
    for (const SequenceChunk& ch : batch) {
      tokens.push_back(static_cast<int64_t>(ch.ids.size()));
      logit_rows.push_back(std::min(tokens.back(), std::max<int64_t>(ch.logits_tail, 0)));
    }
    DSINFER_ASSIGN_OR_RETURN(ModelOutput out,
                             RunSplit(batch, tokens, logit_rows, keep_streams, /*mtp=*/false,
                                      [&](Model& m, const std::vector<SequenceChunk>& mine) {
                                        return m.Forward(mine, LogitsRows::kTail, keep_streams);
                                      }));
    ++stats_.forwards;
    if (eplb_interval_ > 0 && stats_.forwards % eplb_interval_ == 0) {
      InstallRebalance(/*wait=*/true);  // the last plan, if still in flight: at most one behind
      PlanRebalance();
    }
    return out;
  }

  Status SupportsMtp() const override { return V4SupportsMtp(*models_[0]); }
  Status SupportsDSpark() const override { return V4SupportsDSpark(); }
  int64_t stream_width() const override { return StreamWidth(); }
  StatusOr<ModelOutput> ForwardMtp(const std::vector<MtpChunk>& chunks) override {
    DSINFER_RETURN_IF_ERROR(SupportsMtp());
    std::vector<Model::MtpChunk> batch;
    batch.reserve(chunks.size());
    for (const MtpChunk& ch : chunks) batch.push_back({StateOf(ch.seq), ch.streams, ch.next_ids});
    DSINFER_RETURN_IF_ERROR(models_[0]->CheckMtpChunks(batch));
    std::vector<int64_t> tokens, logit_rows;  // a chunk's last row's logits (LogitsRows::kLast)
    for (const Model::MtpChunk& ch : batch) {
      tokens.push_back(static_cast<int64_t>(ch.next_ids.size()));
      logit_rows.push_back(tokens.back() > 0 ? 1 : 0);
    }
    return RunSplit(batch, tokens, logit_rows, /*streams=*/true, /*mtp=*/true,
                    [&](Model& m, const std::vector<Model::MtpChunk>& mine) {
                      return m.ForwardMtp(mine, LogitsRows::kLast);
                    });
  }

  ~ExpertParallelModel() override {
    if (pending_.valid()) pending_.wait();
  }

  const ExpertParallelStats* expert_parallel_stats() const override { return &stats_; }
  void FinishRebalance() { InstallRebalance(/*wait=*/true); }
  void FailRankOnce(int rank, int moe_layer) { rank_.at(rank)->fail_at_layer = moe_layer; }

 private:
  int ranks() const { return static_cast<int>(models_.size()); }
  int64_t StreamWidth() const {
    return int64_t{models_[0]->config().hc_mult} * models_[0]->config().hidden_size;
  }

  // One forward of `batch` (chunk i: tokens[i] rows, logit_rows[i] of them with logits) over the
  // ranks: EPLB's finished plan installed, the chunks split (Split), run(model, its chunks) on
  // each rank with chunks (the others take their idle turn: of the MTP layer with `mtp`), and the
  // outputs put back in chunk order (the streams of every row with `streams`).
  template <typename Chunk, typename Run>
  StatusOr<ModelOutput> RunSplit(const std::vector<Chunk>& batch,
                                 const std::vector<int64_t>& tokens,
                                 const std::vector<int64_t>& logit_rows, bool streams, bool mtp,
                                 const Run& run) {
    InstallRebalance(/*wait=*/false);
    const std::vector<std::vector<size_t>> parts = Split(tokens);
    std::vector<ForwardOutput> outs(parts.size());
    DSINFER_RETURN_IF_ERROR(RunRanks([&](int r) -> Status {
      if (parts[r].empty()) return models_[r]->ForwardIdle(mtp);
      std::vector<Chunk> mine;
      for (size_t i : parts[r]) mine.push_back(batch[i]);
      DSINFER_ASSIGN_OR_RETURN(outs[r], run(*models_[r], mine));
      return Status::Ok();
    }));
    const int64_t vocab = info_.vocab_size, width = StreamWidth();
    std::vector<int64_t> logit_at(batch.size()), stream_at(batch.size());
    int64_t all_logits = 0, all_streams = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      logit_at[i] = all_logits;
      stream_at[i] = all_streams;
      all_logits += logit_rows[i];
      all_streams += tokens[i];
    }
    ModelOutput out;
    out.logits.resize(static_cast<size_t>(all_logits * vocab));
    if (streams) out.streams.resize(static_cast<size_t>(all_streams * width));
    for (size_t r = 0; r < parts.size(); ++r) {
      int64_t lr = 0, sr = 0;  // the rank's rows so far
      for (size_t i : parts[r]) {
        std::copy_n(outs[r].logits.begin() + lr * vocab, logit_rows[i] * vocab,
                    out.logits.begin() + logit_at[i] * vocab);
        if (streams) {
          std::copy_n(outs[r].streams.begin() + sr * width, tokens[i] * width,
                      out.streams.begin() + stream_at[i] * width);
        }
        lr += logit_rows[i];
        sr += tokens[i];
      }
    }
    return out;
  }

  // The chunks of each rank: largest first, each to the rank with the fewest tokens so far (ties:
  // the lower rank), each rank's in chunk order. Deterministic, and a chunk's bits do not depend
  // on it.
  std::vector<std::vector<size_t>> Split(const std::vector<int64_t>& tokens) const {
    std::vector<size_t> order(tokens.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return tokens[a] > tokens[b]; });
    std::vector<int64_t> load(static_cast<size_t>(ranks()), 0);
    std::vector<std::vector<size_t>> parts(static_cast<size_t>(ranks()));
    for (size_t i : order) {
      const size_t r =
          static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      parts[r].push_back(i);
      load[r] += tokens[i];
    }
    for (auto& p : parts) std::sort(p.begin(), p.end());
    return parts;
  }

  // Runs fn(rank) for every rank on a thread each; a rank's error aborts the group (the others'
  // exchanges return it) and is returned, and the group is made anew for the next forward.
  template <typename Fn>
  Status RunRanks(const Fn& fn) {
    std::vector<Status> status(static_cast<size_t>(ranks()), Status::Ok());
    std::vector<std::thread> threads;
    for (int r = 1; r < ranks(); ++r) {
      threads.emplace_back([&, r] {
        status[r] = fn(r);
        if (!status[r].ok()) comms_[r]->Abort(status[r]);
      });
    }
    status[0] = fn(0);
    if (!status[0].ok()) comms_[0]->Abort(status[0]);
    for (std::thread& t : threads) t.join();
    for (const Status& st : status) {
      if (st.ok()) continue;
      NewGroup();
      return st;
    }
    return Status::Ok();
  }

  void CountHeld() {
    stats_.held_experts = 0;
    for (const auto& m : models_) {
      for (int l = 0; l < m->moe_layers(); ++l) {
        for (int e = 0; e < experts_; ++e)
          stats_.held_experts += m->RoutedExpert(l, e).w1.bytes() > 0;
      }
    }
  }

  void NewGroup() {
    comms_ = distributed::MakeLocalGroup(ranks());
    for (int r = 0; r < ranks(); ++r) rank_[r]->comm = comms_[r].get();
  }

  // EPLB, in two parts. Plan (after a forward, every eplb_interval): the rows counted per layer
  // since the last plan are taken (the counts restart) and a background thread re-plans each MoE
  // layer's placement and stages a copy of the weights of each expert a rank will newly hold, read
  // from a rank that holds it now (on GPUs: the transfer between them), while the forwards go on.
  // Install (before a forward, once the staging is done): the staged weights move in, the experts
  // a rank no longer holds are freed, the placements switch. Only one plan is in flight; the
  // weights it reads change only at an install, which waits for it; the next plan waits for the
  // last one's install, so a placement is at most one interval late.
  struct Staged {
    std::vector<distributed::ExpertPlacement> next;  // [layer]
    struct Move {
      int rank, layer, expert;
      ExpertWeights weights;
    };
    std::vector<Move> moves;
    double before = 0, after = 0, contiguous = 0;  // mean over the layers
  };

  void PlanRebalance() {
    const int layers = models_[0]->moe_layers();
    std::vector<std::vector<double>> load(static_cast<size_t>(layers),
                                          std::vector<double>(static_cast<size_t>(experts_), 0.0));
    for (auto& rk : rank_) {
      for (int l = 0; l < layers; ++l) {
        for (int e = 0; e < experts_; ++e) load[l][e] += static_cast<double>(rk->load[l][e]);
        std::fill(rk->load[l].begin(), rk->load[l].end(), 0);
      }
    }
    // What the rows of the window cost each rank on the placement they ran on, per layer.
    double measured = 0;
    for (int l = 0; l < layers; ++l) {
      int64_t most = 0, sum = 0;
      for (auto& rk : rank_) {
        most = std::max(most, rk->served[l]);
        sum += rk->served[l];
        rk->served[l] = 0;
      }
      measured +=
          (sum > 0 ? static_cast<double>(most) * ranks() / static_cast<double>(sum) : 1.0) / layers;
    }
    stats_.imbalance_measured = measured;
    std::vector<distributed::ExpertPlacement> old(rank_[0]->placements.begin(),
                                                  rank_[0]->placements.begin() + layers);
    pending_ = std::async(std::launch::async, [this, load = std::move(load), old = std::move(old)] {
      return Plan(load, old);
    });
  }

  // The background part: each layer's plan from its rows `load`, against its placement `old`,
  // and the weights to move (read from the current holders, which do not change meanwhile).
  Staged Plan(const std::vector<std::vector<double>>& load,
              const std::vector<distributed::ExpertPlacement>& old) const {
    Staged st;
    const double n_layers = static_cast<double>(old.size());
    for (size_t l = 0; l < old.size(); ++l) {
      auto planned = distributed::PlanPlacement(load[l], ranks(), slots_per_rank_);
      DSINFER_CHECK(planned.ok());  // the slots hold every expert (checked at load)
      const double before = distributed::LoadImbalance(old[l], load[l]);
      double after = distributed::LoadImbalance(*planned, load[l]);
      // A plan that gains little is not worth its moves: the layer keeps its placement.
      if (after > before * (1.0 - kMinRebalanceGain)) {
        st.next.push_back(old[l]);
        after = before;
      } else {
        st.next.push_back(std::move(planned).value());
      }
      const distributed::ExpertPlacement& next = st.next.back();
      st.before += before / n_layers;
      st.after += after / n_layers;
      st.contiguous += distributed::LoadImbalance(contiguous_, load[l]) / n_layers;
      for (int r = 0; r < ranks(); ++r) {
        for (int32_t e : next.ExpertsOf(r)) {
          if (old[l].Holds(r, e)) continue;
          const int from = old[l].Holders(e).front();
          st.moves.push_back(
              {r, static_cast<int>(l), e, models_[from]->RoutedExpert(static_cast<int>(l), e)});
        }
      }
    }
    return st;
  }

  // Installs a finished plan (or, with `wait`, waits for the one in flight first).
  void InstallRebalance(bool wait) {
    if (!pending_.valid()) return;
    if (!wait && pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    Staged st = pending_.get();
    for (Staged::Move& m : st.moves) {
      models_[m.rank]->RoutedExpert(m.layer, m.expert) = std::move(m.weights);
    }
    stats_.experts_moved += static_cast<int64_t>(st.moves.size());
    for (int l = 0; l < static_cast<int>(st.next.size()); ++l) {
      const distributed::ExpertPlacement& old = rank_[0]->placements[l];
      for (int r = 0; r < ranks(); ++r) {
        for (int32_t e : old.ExpertsOf(r)) {
          if (!st.next[l].Holds(r, e)) models_[r]->RoutedExpert(l, e) = ExpertWeights{};
        }
      }
      for (auto& rk : rank_) rk->placements[l] = st.next[l];
    }
    ++stats_.rebalances;
    stats_.imbalance_before = st.before;
    stats_.imbalance_after = st.after;
    stats_.imbalance_contiguous = st.contiguous;
    CountHeld();
  }

  std::vector<std::unique_ptr<Model>> models_;
  std::vector<std::unique_ptr<ExpertParallelRank>> rank_;
  std::vector<std::unique_ptr<distributed::Communicator>> comms_;
  ModelInfo info_;
  int experts_ = 0, slots_per_rank_ = 0;
  distributed::ExpertPlacement contiguous_ = distributed::ExpertPlacement::Contiguous(1, 1);
  int64_t eplb_interval_ = 0;
  ExpertParallelStats stats_;
  std::future<Staged> pending_;  // EPLB's plan in flight (declared last: joined first)
};

StatusOr<std::unique_ptr<LanguageModel>> ExpertParallelModel::Load(const std::string& model_dir,
                                                                   const LoadOptions& options) {
  const int ranks = options.expert_parallel;
  if (ranks < 1 || ranks > kMaxRanks) {
    return InvalidArgument("expert parallelism: the ranks must be in [1, " +
                           std::to_string(kMaxRanks) + "], got " + std::to_string(ranks));
  }
  if (options.eplb_redundant_experts < 0 || options.eplb_interval < 0) {
    return InvalidArgument("EPLB: the redundant experts and the interval must not be negative");
  }
  DSINFER_ASSIGN_OR_RETURN(const io::DeepseekV4Config config, io::LoadDeepseekV4Config(model_dir));
  const int experts = static_cast<int>(config.n_routed_experts);
  if (options.eplb_redundant_experts > experts * (ranks - 1)) {
    return InvalidArgument("EPLB: " + std::to_string(options.eplb_redundant_experts) +
                           " redundant experts exceed what " + std::to_string(ranks) +
                           " ranks can hold (a rank holds an expert at most once)");
  }
  std::unique_ptr<ExpertParallelModel> m(new ExpertParallelModel());
  m->experts_ = experts;
  m->contiguous_ = distributed::ExpertPlacement::Contiguous(experts, ranks);
  m->slots_per_rank_ = (experts + options.eplb_redundant_experts + ranks - 1) / ranks;
  m->eplb_interval_ = options.eplb_interval;
  m->stats_.ranks = ranks;
  // Before any count: the experts in order, replicas (if any) of the first ones.
  distributed::ExpertPlacement first = distributed::ExpertPlacement::Contiguous(experts, ranks);
  if (options.eplb_redundant_experts > 0) {
    DSINFER_ASSIGN_OR_RETURN(first, distributed::PlanPlacement(std::vector<double>(experts, 1.0),
                                                               ranks, m->slots_per_rank_));
  }
  DSINFER_CHECK(first.slots_per_rank() == m->slots_per_rank_);
  const int moe_layers = config.num_layers + config.num_mtp_layers;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, (options.num_threads > 0 ? options.num_threads : hw) / ranks);
  m->comms_ = distributed::MakeLocalGroup(ranks);
  for (int r = 0; r < ranks; ++r) {
    auto rk = std::make_unique<ExpertParallelRank>();
    rk->comm = m->comms_[r].get();
    rk->placements.assign(static_cast<size_t>(moe_layers), first);
    rk->load.assign(static_cast<size_t>(moe_layers), std::vector<int64_t>(experts, 0));
    rk->served.assign(static_cast<size_t>(moe_layers), 0);
    ModelOptions mo;
    mo.num_threads = threads;
    mo.kv_cache_dtype = options.kv_cache_dtype;
    mo.fp8_mma = options.fp8_mma;
    DSINFER_ASSIGN_OR_RETURN(auto model, Model::Load(model_dir, mo, [&first, r](int, int e) {
                               return first.Holds(r, e);
                             }));
    model->SetExpertParallel(rk.get());
    m->models_.push_back(std::move(model));
    m->rank_.push_back(std::move(rk));
  }
  m->info_ = InfoOf(m->models_[0]->config());
  m->CountHeld();
  return std::unique_ptr<LanguageModel>(std::move(m));
}

}  // namespace

StatusOr<std::unique_ptr<LanguageModel>> LoadExpertParallel(const std::string& model_dir,
                                                            const LoadOptions& options) {
  return ExpertParallelModel::Load(model_dir, options);
}

void FailRankOnceForTesting(LanguageModel& model, int rank, int moe_layer) {
  auto* m = dynamic_cast<ExpertParallelModel*>(&model);
  DSINFER_CHECK(m != nullptr);
  m->FailRankOnce(rank, moe_layer);
}

void FinishRebalance(LanguageModel& model) {
  if (auto* m = dynamic_cast<ExpertParallelModel*>(&model)) m->FinishRebalance();
}

}  // namespace dsinfer::model::deepseek_v4
