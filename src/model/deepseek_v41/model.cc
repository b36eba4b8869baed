#include "model/deepseek_v41/model.h"

#include <algorithm>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/moe.h"
#include "model/deepseek_v41/attention.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;
using deepseek_v4::HcCollapse;
using deepseek_v4::HcEmbed;
using deepseek_v4::HcMixes;
using deepseek_v4::HcPost;

io::DeepseekV4Config MixingConfig(const io::DeepseekV41Config& c) {
  io::DeepseekV4Config m;
  m.vocab_size = c.vocab_size;
  m.hidden_size = c.hidden_size;
  m.hc_mult = c.hc_mult;
  m.hc_sinkhorn_iters = c.hc_sinkhorn_iters;
  m.hc_eps = c.hc_eps;
  m.rms_norm_eps = c.rms_norm_eps;
  m.n_routed_experts = c.n_routed_experts;
  m.num_experts_per_tok = c.num_experts_per_tok;
  m.moe_intermediate_size = c.moe_intermediate_size;
  m.scoring_func = c.scoring_func;
  m.norm_topk_prob = c.norm_topk_prob && c.num_experts_per_tok > 1;
  m.routed_scaling_factor = c.routed_scaling_factor;
  m.swiglu_limit = c.swiglu_limit;
  return m;
}

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& model_dir,
                                             const ModelOptions& options) {
  std::unique_ptr<Model> m(new Model());
  DSINFER_ASSIGN_OR_RETURN(m->config_, io::LoadDeepseekV41Config(model_dir));
  if (!m->config_.engram_layer_ids.empty()) {
    DSINFER_ASSIGN_OR_RETURN(auto token_map, LoadEngramTokenMap(model_dir, m->config_));
    DSINFER_ASSIGN_OR_RETURN(auto hasher, EngramHasher::Build(m->config_, std::move(token_map)));
    m->engram_ = std::make_unique<EngramHasher>(std::move(hasher));
  }
  m->mixing_ = MixingConfig(m->config_);
  DSINFER_ASSIGN_OR_RETURN(m->ckpt_, io::Checkpoint::Open(model_dir));
  DSINFER_ASSIGN_OR_RETURN(m->weights_, ModelWeights::Load(*m->ckpt_, m->config_));
  if (options.dspark) {
    DSINFER_ASSIGN_OR_RETURN(m->dspark_, DSparkWeights::Load(*m->ckpt_, m->config_));
    m->draft_mixing_ = m->mixing_;
    m->draft_mixing_.n_routed_experts = m->config_.dspark_n_routed_experts;
    m->draft_mixing_.num_experts_per_tok = m->config_.dspark_num_experts_per_tok;
    m->draft_mixing_.norm_topk_prob =
        m->config_.norm_topk_prob && m->config_.dspark_num_experts_per_tok > 1;
  }
  m->rope_ = RopeTables::Build(m->config_);
  m->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  return m;
}

Status Model::CheckIds(const std::vector<int32_t>& ids) const {
  DSINFER_RETURN_IF_ERROR(deepseek_v4::CheckTokenIds(ids, config_.vocab_size));
  for (int32_t id : ids) {
    if (config_.has_vision && id == config_.image_token_id) {
      return InvalidArgument("image inputs are not supported: token id " + std::to_string(id) +
                             " is the image token and the DeepSeek-V4.1 vision tower is not built");
    }
  }
  return Status::Ok();
}

// One block with single-pass mHC: each site computes its (pre, post, comb) from its input streams,
// but collapses with the previous site's pre (the attention with `pre_mix`, the FFN with the
// attention site's pre); the FFN site's pre becomes the next block's `pre_mix`.
std::vector<int64_t> Model::EngramHashes(const TokenBatch& batch) const {
  const EngramHasher& h = *engram_;
  const int64_t width = int64_t{h.layers()} * h.cols();
  std::vector<int64_t> out(static_cast<size_t>(batch.size() * width));
  std::vector<int32_t> back(static_cast<size_t>(h.max_ngram));
  for (const BatchSegment& seg : batch.segments) {
    SequenceState& st = *seg.state;
    DSINFER_CHECK(st.tokens().end() == seg.start_pos);  // the ring follows the state's length
    for (int64_t i = 0; i < seg.count; ++i) {
      const int64_t p = seg.start_pos + i;
      for (int k = 0; k < h.max_ngram; ++k) {
        const int64_t q = p - k;
        back[k] = q < 0                ? -1
                  : q >= seg.start_pos ? batch.ids[seg.begin + q - seg.start_pos]
                                       : st.TokenAt(q);
      }
      h.Hash(back.data(), out.data() + (seg.begin + i) * width);
    }
    for (int64_t i = 0; i < seg.count; ++i) st.AppendToken(batch.ids[seg.begin + i]);
  }
  return out;
}

void Model::Block(int layer, TokenBatch& batch, float* X, std::vector<float>* pre_mix,
                  const std::vector<int64_t>& hash_ids, const std::vector<int64_t>* tap_rows,
                  float* taps) {
  const BlockWeights& w = weights_->layers[layer];
  const auto& m = mixing_;
  const int64_t n = batch.size(), D = config_.hidden_size, hc = config_.hc_mult;
  if (w.engram != nullptr) {
    // The n-gram lookup enters the streams before the block (before its mHC mixes).
    const int64_t cols = engram_->cols();
    EngramForward(*w.engram, config_, hash_ids.data() + engram_->IndexOf(layer) * cols,
                  int64_t{engram_->layers()} * cols, n, X, pool_.get());
  }
  if (taps != nullptr) {
    // DSpark's tap: the mean of the streams entering the layer (after its Engram lookup).
    const auto& targets = config_.dspark_target_layer_ids;
    const auto it = std::find(targets.begin(), targets.end(), layer);
    if (it != targets.end()) {
      const int64_t j = it - targets.begin(), T = static_cast<int64_t>(targets.size());
      pool_->ParallelFor(static_cast<int64_t>(tap_rows->size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t t = (*tap_rows)[i];
          float* out = taps + (i * T + j) * D;
          for (int64_t k = 0; k < D; ++k) {
            float sum = 0.0f;
            for (int64_t h = 0; h < hc; ++h) sum += X[(t * hc + h) * D + k];
            out[k] = sum / static_cast<float>(hc);
          }
        }
      });
    }
  }
  RunSites(
      w, m, X, pre_mix->data(), n,
      [&](const float* u, float* y) {
        AttentionForward(w.attn, config_, rope_, layer, batch, u, y, pool_.get());
      },
      [&](const float* u, float* y) {
        deepseek_v4::MoeForward(w.ffn, m, u, batch.ids.data(), n, y, pool_.get());
      },
      pool_.get());
}

void RunSites(const deepseek_v4::BlockSites& w, const io::DeepseekV4Config& m, float* X,
              float* pre_mix, int64_t n, const SublayerFn& attention, const SublayerFn& ffn,
              ThreadPool* pool) {
  const int64_t D = m.hidden_size, hc = m.hc_mult;
  const float eps = static_cast<float>(m.rms_norm_eps);
  std::vector<float> u(static_cast<size_t>(n * D)), y(static_cast<size_t>(n * D));  // [n, D]
  std::vector<float> attn_pre(static_cast<size_t>(n * hc)), post(static_cast<size_t>(n * hc));
  std::vector<float> comb(static_cast<size_t>(n * hc * hc));  // [n, hc, hc]

  HcMixes(w.hc_attn, m, X, n, attn_pre.data(), post.data(), comb.data(), pool);
  HcCollapse(m, X, pre_mix, n, u.data());
  cpu::RmsNorm(u.data(), n, D, w.attn_norm.data(), eps);
  attention(u.data(), y.data());
  HcPost(m, y.data(), post.data(), comb.data(), n, X);

  HcMixes(w.hc_ffn, m, X, n, pre_mix, post.data(), comb.data(), pool);
  HcCollapse(m, X, attn_pre.data(), n, u.data());
  cpu::RmsNorm(u.data(), n, D, w.ffn_norm.data(), eps);
  ffn(u.data(), y.data());
  HcPost(m, y.data(), post.data(), comb.data(), n, X);
}

StatusOr<std::vector<float>> Model::Forward(const std::vector<SequenceChunk>& chunks,
                                            LogitsRows rows) {
  const auto& c = config_;
  TokenBatch batch;
  for (const auto& ch : chunks) {
    if (ch.state == nullptr) return InvalidArgument("a chunk has no sequence state");
    if (ch.state->draft_stages() != (dspark_ ? c.num_nextn_predict_layers : 0)) {
      return InvalidArgument("a sequence state's DSpark rings do not match the model's drafter");
    }
    DSINFER_RETURN_IF_ERROR(CheckIds(ch.ids));
    for (const auto& seg : batch.segments) {
      if (seg.state == ch.state)
        return InvalidArgument("a request appears twice in one forward batch");
    }
    const int64_t end = ch.state->length() + static_cast<int64_t>(ch.ids.size());
    if (c.max_position_embeddings > 0 && end > c.max_position_embeddings) {
      return OutOfRange("sequence of " + std::to_string(end) +
                        " tokens exceeds max_position_embeddings " +
                        std::to_string(c.max_position_embeddings));
    }
    BatchSegment seg;
    seg.state = ch.state;
    seg.begin = batch.size();
    seg.count = static_cast<int64_t>(ch.ids.size());
    seg.start_pos = ch.state->length();
    for (size_t i = 0; i < ch.ids.size(); ++i) {
      batch.ids.push_back(ch.ids[i]);
      batch.positions.push_back(seg.start_pos + static_cast<int64_t>(i));
    }
    batch.segments.push_back(std::move(seg));
  }
  const int64_t n = batch.size(), D = c.hidden_size, hc = c.hc_mult;

  // X [N, hc, D] = embed[ids] on every stream; the first site collapses stream 0 only.
  std::vector<float> X = HcEmbed(weights_->embed, batch.ids, hc, D);
  std::vector<float> pre_mix(static_cast<size_t>(n * hc), 0.0f);
  for (int64_t t = 0; t < n; ++t) pre_mix[t * hc] = 1.0f;
  const std::vector<int64_t> hash_ids =
      engram_ != nullptr ? EngramHashes(batch) : std::vector<int64_t>();
  std::vector<int64_t> tap_rows;
  std::vector<float> taps;  // [tap_rows, target layers, D]
  if (dspark_) {
    tap_rows = DraftContextRows(batch);
    taps.resize(tap_rows.size() * c.dspark_target_layer_ids.size() * static_cast<size_t>(D));
  }
  for (int l = 0; l < c.num_layers; ++l) {
    Block(l, batch, X.data(), &pre_mix, hash_ids, dspark_ ? &tap_rows : nullptr, taps.data());
  }
  if (dspark_) WriteDraftContext(batch, tap_rows, taps);
  for (const auto& seg : batch.segments) seg.state->set_length(seg.start_pos + seg.count);

  // Final collapse with the last site's pre, norm, head.
  std::vector<int64_t> sel;
  for (size_t k = 0; k < batch.segments.size(); ++k) {
    const BatchSegment& seg = batch.segments[k];
    const int64_t tail = rows == LogitsRows::kAll    ? seg.count
                         : rows == LogitsRows::kLast ? 1
                                                     : chunks[k].logits_tail;
    for (int64_t i = std::max<int64_t>(0, seg.count - tail); i < seg.count; ++i) {
      sel.push_back(seg.begin + i);
    }
  }
  const int64_t m = static_cast<int64_t>(sel.size());
  std::vector<float> xs(static_cast<size_t>(m * hc * D)), ps(static_cast<size_t>(m * hc));
  for (int64_t i = 0; i < m; ++i) {
    std::copy_n(X.data() + sel[i] * hc * D, hc * D, xs.data() + i * hc * D);
    std::copy_n(pre_mix.data() + sel[i] * hc, hc, ps.data() + i * hc);
  }
  std::vector<float> z(static_cast<size_t>(m * D));
  HcCollapse(mixing_, xs.data(), ps.data(), m, z.data());
  cpu::RmsNorm(z.data(), m, D, weights_->norm.data(), static_cast<float>(c.rms_norm_eps));
  std::vector<float> logits(static_cast<size_t>(m * c.vocab_size));
  cpu::Linear(z.data(), m, D, weights_->head.view(), c.vocab_size, logits.data(), pool_.get());
  return logits;
}

}  // namespace dsinfer::model::deepseek_v41
