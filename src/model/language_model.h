// LanguageModel: the model-family seam. The CPU runner (executor/cpu_model_runner.cc) drives every
// family through it — one engine, scheduler, sampler and state cache for DeepSeek-V4 and
// DeepSeek-V4.1 — and each family implements it over its own model (model/deepseek_v4/
// language_model.h, model/deepseek_v41/language_model.h); LoadLanguageModel (model_loader.h)
// picks the family by the model dir's config. A family describes its per-request state as a
// cache::StateLayout and keeps it in the pages the engine's cache assigns, so continuous batching,
// preemption, n > 1 forks and the prefix cache work the same for every family. Forward must be
// called from one thread at a time; a ModelSequence is owned by one request.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/check.h"
#include "base/status.h"
#include "cache/state_layout.h"
#include "cache/state_pages.h"
#include "io/model_config.h"
#include "io/model_family.h"

namespace dsinfer::model {

// What the engine needs to know of a model, whatever its family.
struct ModelInfo {
  io::ModelFamily family = io::ModelFamily::kDeepseekV4;
  int64_t vocab_size = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t max_position_embeddings = 0;
  // Token ids the model cannot take (DeepSeek-V4.1's image token while its vision tower is not
  // built): the engine refuses prompts holding one and never samples one.
  std::vector<int32_t> refused_ids;
  // The tokens DeepSeek-V4.1's DSpark drafter drafts at once (dspark_block_size; 0: the config has
  // no draft layers).
  int draft_block_size = 0;
};

// One request's state (its tokens so far), in the pages it was created on.
class ModelSequence {
 public:
  virtual ~ModelSequence() = default;
  // Tokens processed (= the next position).
  virtual int64_t length() const = 0;
  // Back to the state after its first `length` tokens (the rejected drafts of a verify step; at
  // most the rollback slack it was created with): OutOfRange beyond it.
  virtual Status Rollback(int64_t length) = 0;
  // Becomes a copy of `other`, a sequence of the same model and slack.
  virtual void CopyFrom(const ModelSequence& other) = 0;
  // Bytes of its rows (= the layout's ExactBytes(length())).
  virtual size_t bytes() const = 0;
  // MTP (families with an MTP layer): the rows its layer has processed, and its own rollback.
  virtual int64_t mtp_length() const { return length(); }
  virtual Status RollbackMtp(int64_t mtp_length) {
    (void)mtp_length;
    return Status::Ok();
  }
};

// A family's per-request state type as a ModelSequence (State: length(), Rollback(n),
// CopyFrom(const State&), bytes()).
template <typename State>
class StateSequence : public ModelSequence {
 public:
  explicit StateSequence(std::unique_ptr<State> state) : state_(std::move(state)) {}
  State* state() const { return state_.get(); }
  // The state of a sequence its family made (another family's is our bug).
  static State* StateOf(const ModelSequence* seq) {
    auto* s = dynamic_cast<const StateSequence*>(seq);
    DSINFER_CHECK(s != nullptr);
    return s->state_.get();
  }

  int64_t length() const override { return state_->length(); }
  Status Rollback(int64_t length) override { return state_->Rollback(length); }
  void CopyFrom(const ModelSequence& other) override { state_->CopyFrom(*StateOf(&other)); }
  size_t bytes() const override { return state_->bytes(); }

 protected:
  std::unique_ptr<State> state_;
};

// The ModelInfo of a family's config (Config: vocab_size, bos_token_id, eos_token_id,
// max_position_embeddings).
template <typename Config>
ModelInfo InfoFromConfig(io::ModelFamily family, const Config& c) {
  ModelInfo info;
  info.family = family;
  info.vocab_size = c.vocab_size;
  info.bos_token_id = c.bos_token_id;
  info.eos_token_id = c.eos_token_id;
  info.max_position_embeddings = c.max_position_embeddings;
  return info;
}

// A request's tokens for one forward call: appended at positions seq->length() ...
struct ModelChunk {
  ModelSequence* seq = nullptr;
  std::vector<int32_t> ids;
  int64_t logits_tail = 1;  // logits of this many trailing rows (0: none)
};

struct ModelOutput {
  std::vector<float> logits;   // [sum of the chunks' tails, vocab]
  std::vector<float> streams;  // MTP: [rows, stream_width()] every row's streams, if asked
};

// MTP rows of one sequence (LanguageModel::ForwardMtp).
struct MtpChunk {
  ModelSequence* seq = nullptr;
  std::vector<float> streams;     // [count, stream_width()] the main model's rows mtp_length() ...
  std::vector<int32_t> next_ids;  // [count] the token after each row
};

// One sequence's block draft (LanguageModel::DraftDSpark): the drafts after `anchor`, the token
// drawn after the sequence's last row (not yet run).
struct DSparkChunk {
  ModelSequence* seq = nullptr;
  int32_t anchor = 0;
};
struct BlockDraft {
  std::vector<int32_t> ids;        // [block] the drafts
  std::vector<float> accept_prob;  // [block] each draft's acceptance probability, given the
                                   // ones before it were accepted (the confidence head)
};

// Expert parallelism's state (LoadOptions::expert_parallel), as far as EPLB has got.
struct ExpertParallelStats {
  int ranks = 1;
  int64_t forwards = 0;
  int64_t rebalances = 0;     // placements installed
  int64_t experts_moved = 0;  // expert weights copied to a rank that did not hold them
  // Routed experts' weights in memory, over every rank and MoE layer (E x layers without
  // replicas: each rank loads only its share).
  int64_t held_experts = 0;
  // The last installed plan's expected busiest-rank load over the mean (distributed::
  // LoadImbalance; 1: balanced) for the rows counted since the plan before, averaged over the MoE
  // layers: under the placement they ran on, the one installed, and (for reference) the experts
  // in order without replicas (0: no plan yet).
  double imbalance_before = 0, imbalance_after = 0, imbalance_contiguous = 0;
  // The same window as it ran: per layer, the rows the busiest rank's experts computed over the
  // mean (the placement in use; each source's rows of an expert split over its replicas in turn),
  // averaged over the layers.
  double imbalance_measured = 0;
};

struct LoadOptions {
  int num_threads = 0;  // 0: all hardware threads
  bool dspark = false;  // load and run the model's DSpark drafter (DeepSeek-V4.1)
  // DeepSeek-V4: the attention state's rounding and storage (io::KvCacheDtype). DeepSeek-V4.1
  // always rounds and stores its cache in FP8/FP4 (its reference does): kFloat32 is refused.
  io::KvCacheDtype kv_cache_dtype = io::KvCacheDtype::kAuto;
  // Expert parallelism (DeepSeek-V4; model/deepseek_v4/expert_parallel.h): the routed experts
  // sharded over this many ranks (threads of this process, each with its own share of the
  // threads), the rest replicated and each forward's requests split among the ranks; 1: off.
  int expert_parallel = 1;
  // EPLB: spare expert slots per MoE layer (over all ranks) for replicas of busy experts, and the
  // forwards between rebalances from the routed rows counted meanwhile (0: never).
  int eplb_redundant_experts = 0;
  int64_t eplb_interval = 0;
  // DeepSeek-V4: the FP8-instruction numerics mode (deepseek_v4::ModelOptions::fp8_mma): the FP8 /
  // FP4 linears round as Hopper's FP8 MMA does. DeepSeek-V4.1 refuses it for now.
  bool fp8_mma = false;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual const ModelInfo& info() const = 0;
  // The layout of one sequence's state that can roll back its last `rollback_slack` tokens.
  virtual cache::StateLayout StateLayoutFor(int rollback_slack) const = 0;
  // A sequence whose rows live in `pages` (not owned), laid out as `layout` =
  // StateLayoutFor(rollback_slack).
  virtual std::unique_ptr<ModelSequence> NewSequence(int rollback_slack,
                                                     const cache::StateLayout& layout,
                                                     cache::StatePages* pages) const = 0;
  // Runs the chunks (each sequence at most once) and advances their states; logits of each
  // chunk's last logits_tail rows, in chunk order. A chunk's logits depend only on its own
  // sequence (batch invariance) and not on how its tokens were chunked. keep_streams: also every
  // row's MTP input streams. Bad token ids are refused before anything changes.
  virtual StatusOr<ModelOutput> Forward(const std::vector<ModelChunk>& chunks,
                                        bool keep_streams) = 0;

  // Expert parallelism's stats (null: the model is not split; LoadOptions::expert_parallel).
  virtual const ExpertParallelStats* expert_parallel_stats() const { return nullptr; }

  // Ok when the model can draft with an MTP layer, else why not.
  virtual Status SupportsMtp() const = 0;
  // Floats per row of the MTP input streams.
  virtual int64_t stream_width() const { return 0; }
  // The MTP layer on each chunk's rows: its logits at each chunk's last row.
  virtual StatusOr<ModelOutput> ForwardMtp(const std::vector<MtpChunk>& chunks) {
    (void)chunks;
    return SupportsMtp().ok() ? Unimplemented("ForwardMtp") : SupportsMtp();
  }

  // Ok when the model was loaded with a DSpark drafter (LoadOptions::dspark), else why not.
  virtual Status SupportsDSpark() const {
    return InvalidArgument("DSpark speculative decoding: the model has no DSpark drafter");
  }
  // The drafter's block after each chunk's sequence (its state does not change).
  virtual StatusOr<std::vector<BlockDraft>> DraftDSpark(const std::vector<DSparkChunk>& chunks) {
    (void)chunks;
    return SupportsDSpark();
  }
};

}  // namespace dsinfer::model
