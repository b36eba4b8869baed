// DeepSeek-V4 on the CPU backend (spec §2): embedding, the decoder blocks with mHC, the final
// hc_head + norm + head, and the MTP layer (§2.11). Forward runs one batch of token rows from any
// number of requests and advances their SequenceStates. The weights are immutable; Forward must be
// called from one thread at a time (it uses the model's thread pool).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "io/model_config.h"
#include "model/deepseek_v4/batch.h"
#include "model/deepseek_v4/rope_table.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

struct ModelOptions {
  int num_threads = 0;  // 0: all hardware threads
  // The attention state's rounding and storage (io::KvCacheDtype; kAuto: kFloat32), set into
  // config().kv_cache_dtype.
  io::KvCacheDtype kv_cache_dtype = io::KvCacheDtype::kAuto;
  // The FP8-instruction numerics mode (io::DeepseekV4Config::fp8_mma): the FP8 / FP4 linears
  // round as Hopper's FP8 MMA does (backend/wgmma_fp8.h); the exact products otherwise.
  bool fp8_mma = false;
};

// A request's tokens for one forward call.
struct SequenceChunk {
  SequenceState* state = nullptr;
  std::vector<int32_t> ids;  // appended at positions state->length() ...
  int64_t logits_tail = 1;   // LogitsRows::kTail: logits of this many trailing rows (0: none)
};

enum class LogitsRows {
  kAll,   // every row (prefill scoring, `dsinfer logits`)
  kLast,  // the last row of each chunk (generation)
  kTail,  // each chunk's last `logits_tail` rows (speculative verification)
};

struct ForwardOutput {
  std::vector<float> logits;   // [rows, vocab] (rows per LogitsRows)
  std::vector<float> streams;  // [N, hc, D] the residual streams before hc_head (MTP input); if asked
};

// A rank of an expert-parallel group (model/deepseek_v4/expert_parallel.h): its communicator, each
// MoE layer's placement (ModelWeights::MoeLayer's numbering; the rank's weights hold its experts
// of it) and each layer's count of rows this rank routed to each expert (for EPLB).
struct ExpertParallelRank {
  distributed::Communicator* comm = nullptr;
  std::vector<distributed::ExpertPlacement> placements;
  std::vector<std::vector<int64_t>> load;  // [moe layer][expert]
  std::vector<int64_t> served;             // [moe layer] rows its experts computed
  // Fault injection for tests: the next MoE call of this layer fails (Internal) instead of
  // taking part in the exchange, as a rank that fails mid-forward (-1: none).
  int fail_at_layer = -1;
};

// InvalidArgument naming the first id outside [0, vocab_size) (both families' input check).
Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t vocab_size);

class Model {
 public:
  // holds_expert (expert parallelism): the routed experts to load (empty: all of them).
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& model_dir,
                                               const ModelOptions& options = {},
                                               const ExpertFilter& holds_expert = {});

  const io::DeepseekV4Config& config() const { return config_; }
  bool has_mtp() const { return !weights_->mtp.empty(); }
  // Bytes of weights one decode token reads at batch 1, as held in memory (the head, every
  // layer's attention / compressor / indexer / mHC / router weights, top-k routed + shared
  // experts): the numerator of the decode memory-bandwidth bound.
  int64_t ActiveWeightBytes() const;
  std::unique_ptr<SequenceState> NewSequence(int rollback_slack = 16) const {
    return std::make_unique<SequenceState>(config_, rollback_slack);
  }
  // A state whose rows live in `pages` (e.g. the engine's state cache), laid out as `layout`
  // (= DeepseekV4StateLayout(config(), rollback_slack)).
  std::unique_ptr<SequenceState> NewSequence(int rollback_slack, const StateLayout& layout,
                                             StatePages* pages) const {
    return std::make_unique<SequenceState>(config_, rollback_slack, layout, pages);
  }

  // Runs the chunks (each request at most once) and advances their states. Token ids are checked
  // against the vocabulary (InvalidArgument) before anything changes.
  StatusOr<ForwardOutput> Forward(const std::vector<SequenceChunk>& chunks, LogitsRows rows,
                                  bool keep_streams = false);
  // Forward's checks of its chunks (ids, lengths, each request once), nothing run.
  Status CheckChunks(const std::vector<SequenceChunk>& chunks) const;

  // MTP draft logits (spec §2.11). For each chunk: rows i = state->mtp_length() ... pair the main
  // model's pre-hc_head streams of position i (`streams`, [count, hc, D]) with token t_{i+1}
  // (`next_ids`), and return logits for t_{i+2} per LogitsRows.
  struct MtpChunk {
    SequenceState* state = nullptr;
    std::vector<float> streams;     // [count, hc, D]
    std::vector<int32_t> next_ids;  // [count]
  };
  StatusOr<ForwardOutput> ForwardMtp(const std::vector<MtpChunk>& chunks, LogitsRows rows);
  // ForwardMtp's checks of its chunks, nothing run.
  Status CheckMtpChunks(const std::vector<MtpChunk>& chunks) const;

  // Expert parallelism: this model is rank `ep`'s (not owned; null: a model of its own). Its MoE
  // layers then exchange rows with the group's other ranks, so every rank runs each forward: one
  // with rows through Forward / ForwardMtp, one without them through ForwardIdle.
  void SetExpertParallel(ExpertParallelRank* ep) { ep_ = ep; }
  // A rank's turn in a forward that gives it no rows: each MoE layer's exchanges (of the decoder
  // layers, or with `mtp` of the MTP layer), serving the other ranks' rows.
  Status ForwardIdle(bool mtp);
  // The routed expert `expert` of MoE layer `moe_layer` (empty when this rank does not hold it).
  ExpertWeights& RoutedExpert(int moe_layer, int expert) {
    return weights_->MoeLayer(moe_layer).experts[expert];
  }
  int moe_layers() const { return weights_->moe_layers(); }

 private:
  Model() = default;
  // One decoder block over X [N, hc, D] (in place). `layer` addresses the state layer (and the MoE
  // layer: the MTP block's is num_layers).
  Status Block(const BlockWeights& w, int layer, const TokenBatch& batch, float* X);
  // The block's MoE over u [N, D] into y, expert-parallel when the model is a rank.
  Status Moe(const MoeWeights& w, int moe_layer, const float* u, const int32_t* ids, int64_t n,
             float* y);
  // hc_head + norm + head over the selected rows of X.
  std::vector<float> Head(const HyperHeadWeights& hc_head, const std::vector<float>& norm,
                          const float* X, const std::vector<int64_t>& rows);
  Status CheckIds(const std::vector<int32_t>& ids) const;

  io::DeepseekV4Config config_;
  std::unique_ptr<ModelWeights> weights_;
  RopeTables rope_;
  std::unique_ptr<ThreadPool> pool_;
  ExpertParallelRank* ep_ = nullptr;
};

}  // namespace dsinfer::model::deepseek_v4
