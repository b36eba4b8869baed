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

// InvalidArgument naming the first id outside [0, vocab_size) (both families' input check).
Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t vocab_size);

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& model_dir,
                                               const ModelOptions& options = {});

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

  // MTP draft logits (spec §2.11). For each chunk: rows i = state->mtp_length() ... pair the main
  // model's pre-hc_head streams of position i (`streams`, [count, hc, D]) with token t_{i+1}
  // (`next_ids`), and return logits for t_{i+2} per LogitsRows.
  struct MtpChunk {
    SequenceState* state = nullptr;
    std::vector<float> streams;     // [count, hc, D]
    std::vector<int32_t> next_ids;  // [count]
  };
  StatusOr<ForwardOutput> ForwardMtp(const std::vector<MtpChunk>& chunks, LogitsRows rows);

 private:
  Model() = default;
  // One decoder block over X [N, hc, D] (in place). `layer` addresses the state layer.
  void Block(const BlockWeights& w, int layer, const TokenBatch& batch, float* X);
  // hc_head + norm + head over the selected rows of X.
  std::vector<float> Head(const HyperHeadWeights& hc_head, const std::vector<float>& norm,
                          const float* X, const std::vector<int64_t>& rows);
  Status CheckIds(const std::vector<int32_t>& ids) const;

  io::DeepseekV4Config config_;
  std::unique_ptr<ModelWeights> weights_;
  RopeTables rope_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace dsinfer::model::deepseek_v4
