// DeepSeek-V4.1 text model on the CPU backend (reference: transformers `modeling_deepseek_v41.py`,
// documented in docs/architecture.md "DeepSeek-V4.1"): embedding broadcast to the hc streams, the
// decoder blocks with single-pass mHC and CSA2 attention with KV sharing, the final collapse with
// the last site's `pre` mix, norm and head. Forward runs one batch of token rows from any number of
// requests and advances their SequenceStates; every prefill/decode schedule gives the same logits.
// The Engram n-gram memory (engram.h) runs at its layers, hashing each row's n-gram with the
// look-back the sequence state keeps. With ModelOptions::dspark the DSpark drafter (its `mtp.*`
// stages) runs too: every Forward writes each row's context (the target layers' taps, projected
// per stage) into the sequence's draft rings, and DraftDSpark drafts a block of tokens after a
// sequence in one pass (docs/architecture.md "DSpark"). Not built yet: the vision tower (image
// tokens are refused with a clear error). The weights are immutable; Forward and DraftDSpark must
// be called from one thread at a time (they use the model's thread pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/deepseek_v41_config.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/batch.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/rope.h"
#include "model/deepseek_v41/state.h"
#include "model/deepseek_v41/weights.h"

namespace dsinfer::model::deepseek_v41 {

using deepseek_v4::LogitsRows;

struct ModelOptions {
  int num_threads = 0;  // 0: all hardware threads
  bool dspark = false;  // load and run the DSpark drafter (the config must have draft layers)
};

// One sequence's DSpark draft (Model::DraftDSpark).
struct DSparkRequest {
  SequenceState* state = nullptr;
  int32_t anchor = 0;  // the token after the state's last one (drawn, not yet run)
};
struct DSparkDraft {
  std::vector<int32_t> ids;       // [block] the drafts: the tokens after the anchor
  std::vector<float> logits;      // [block, vocab] the Markov-corrected logits (if asked)
  std::vector<float> base;        // [block, vocab] the head's logits before the Markov term
  std::vector<float> confidence;  // [block] the confidence head's logits (raw)
};

// A request's tokens for one forward call.
struct SequenceChunk {
  SequenceState* state = nullptr;
  std::vector<int32_t> ids;  // appended at positions state->length() ...
  int64_t logits_tail = 1;   // LogitsRows::kTail: logits of this many trailing rows (0: none)
};

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& model_dir,
                                               const ModelOptions& options = {});

  const io::DeepseekV41Config& config() const { return config_; }
  // The Engram hash constants (nullptr without Engram layers).
  const EngramHasher* engram() const { return engram_.get(); }
  bool has_dspark() const { return dspark_ != nullptr; }
  // Heap-backed state that can roll back its last `rollback_slack` tokens.
  std::unique_ptr<SequenceState> NewSequence(int rollback_slack = 16) const {
    return std::make_unique<SequenceState>(config_, rollback_slack, has_dspark());
  }
  // A state whose rows live in `pages` (e.g. the engine's state cache), laid out as `layout`
  // (= DeepseekV41StateLayout(config(), rollback_slack, has_dspark())).
  std::unique_ptr<SequenceState> NewSequence(int rollback_slack, const cache::StateLayout& layout,
                                             StatePages* pages) const {
    return std::make_unique<SequenceState>(config_, rollback_slack, layout, pages);
  }

  // Runs the chunks (each request at most once) and advances their states; returns the logits
  // [rows, vocab] of the selected rows in chunk order. Token ids are checked (vocabulary, image
  // tokens) before anything changes.
  StatusOr<std::vector<float>> Forward(const std::vector<SequenceChunk>& chunks, LogitsRows rows);

  // DSpark (has_dspark()): for each request, the block [anchor, noise, ...] at positions
  // length() ... runs through the draft stages, attending the sequence's last sliding_window
  // context rows and the whole block; the head's logits plus the Markov term of the previous
  // token (the anchor, then each draft) give the greedy drafts (ties to the smallest id) and the
  // confidence head each one's acceptance logit. The states do not change. `logits`: also return
  // the logits rows (tests).
  StatusOr<std::vector<DSparkDraft>> DraftDSpark(const std::vector<DSparkRequest>& requests,
                                                 bool logits = false);

 private:
  Model() = default;
  // `hash_ids`: [rows, engram layers, cols] (Engram configs), else empty. DSpark: `taps`
  // [tap_rows, target layers, D], where a target layer's input streams' mean is written for the
  // batch rows `tap_rows` (null: none).
  void Block(int layer, TokenBatch& batch, float* X, std::vector<float>* pre_mix,
             const std::vector<int64_t>& hash_ids, const std::vector<int64_t>* tap_rows,
             float* taps);
  // DSpark: the batch rows whose context the draft rings keep (each segment's last ring-capacity
  // rows), and their context K=V of every stage from their taps, appended to the rings.
  std::vector<int64_t> DraftContextRows(const TokenBatch& batch) const;
  void WriteDraftContext(const TokenBatch& batch, const std::vector<int64_t>& tap_rows,
                         const std::vector<float>& taps);
  Status CheckIds(const std::vector<int32_t>& ids) const;
  // Hashes every row's n-gram (its look-back from the chunk and the state's token ring) and
  // appends the rows' tokens to their states' rings.
  std::vector<int64_t> EngramHashes(const TokenBatch& batch) const;

  std::unique_ptr<io::Checkpoint> ckpt_;  // kept mapped: the Engram tables are read from it
  std::unique_ptr<EngramHasher> engram_;  // Engram configs
  io::DeepseekV41Config config_;
  io::DeepseekV4Config mixing_;  // the V4 view of the mHC / MoE fields (shared V4 code)
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<DSparkWeights> dspark_;  // with ModelOptions::dspark
  io::DeepseekV4Config draft_mixing_;      // the draft stages' MoE sizes
  RopeTables rope_;
  std::unique_ptr<ThreadPool> pool_;
};

// A sublayer: the normed collapse u [n, D] -> its output y [n, D].
using SublayerFn = std::function<void(const float* u, float* y)>;
// One block's two sites with single-pass mHC (the backbone's blocks and DSpark's stages): each
// site computes its (pre, post, comb) from its input streams X [n, hc, D] but collapses with the
// previous site's pre — the attention site with `pre_mix` [n, hc], the FFN site with the attention
// site's — and the FFN site's pre becomes `pre_mix` for the next block. `m`: the mixing config
// (hidden_size, hc_mult, rms_norm_eps, the mHC settings).
void RunSites(const deepseek_v4::BlockSites& w, const io::DeepseekV4Config& m, float* X,
              float* pre_mix, int64_t n, const SublayerFn& attention, const SublayerFn& ffn,
              ThreadPool* pool);

// The fields of `c` that the V4 mHC and MoE code reads, as a V4 config. With one routed expert per
// token the reference does not normalize the routing weight, so neither does this view.
io::DeepseekV4Config MixingConfig(const io::DeepseekV41Config& c);

}  // namespace dsinfer::model::deepseek_v41
