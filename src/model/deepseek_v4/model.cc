#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/moe.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& model_dir,
                                             const ModelOptions& options,
                                             const ExpertFilter& holds_expert) {
  std::unique_ptr<Model> m(new Model());
  DSINFER_ASSIGN_OR_RETURN(m->config_, io::LoadDeepseekV4Config(model_dir));
  m->config_.kv_cache_dtype = io::ResolveV4KvCacheDtype(options.kv_cache_dtype);
  m->config_.fp8_mma = options.fp8_mma;
  DSINFER_ASSIGN_OR_RETURN(auto ckpt, io::Checkpoint::Open(model_dir));
  DSINFER_ASSIGN_OR_RETURN(m->weights_, ModelWeights::Load(*ckpt, m->config_, holds_expert));
  m->rope_ = RopeTables::Build(m->config_);
  m->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  return m;
}

int64_t Model::ActiveWeightBytes() const {
  const auto& c = config_;
  int64_t bytes = weights_->head.bytes();
  for (const BlockWeights& b : weights_->layers) {
    const AttentionWeights& a = b.attn;
    bytes += a.wq_a.bytes() + a.wq_b.bytes() + a.wkv.bytes() + a.wo_a.bytes() + a.wo_b.bytes();
    if (a.compressor) bytes += a.compressor->wkv_wgate.bytes();
    if (a.indexer) {
      bytes += a.indexer->wq_b.bytes() + a.indexer->weights_proj.bytes() +
               a.indexer->compressor.wkv_wgate.bytes();
    }
    bytes += static_cast<int64_t>((b.hc_attn.fn.size() + b.hc_ffn.fn.size()) * sizeof(float));
    bytes += b.ffn.gate.bytes();
    // (one routed expert's bytes: any the model holds, for an expert-parallel rank)
    const ExpertWeights& e = *std::find_if(b.ffn.experts.begin(), b.ffn.experts.end() - 1,
                                           [](const ExpertWeights& x) { return x.w1.bytes() > 0; });
    bytes += c.num_experts_per_tok * (e.w1.bytes() + e.w2.bytes() + e.w3.bytes());
    if (b.ffn.shared) bytes += b.ffn.shared->w1.bytes() + b.ffn.shared->w2.bytes() + b.ffn.shared->w3.bytes();
  }
  return bytes;
}

Status CheckTokenIds(const std::vector<int32_t>& ids, int64_t vocab_size) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
  }
  return Status::Ok();
}

Status Model::CheckIds(const std::vector<int32_t>& ids) const {
  return CheckTokenIds(ids, config_.vocab_size);
}

Status Model::Moe(const MoeWeights& w, int moe_layer, const float* u, const int32_t* ids, int64_t n,
                  float* y) {
  if (ep_ == nullptr) {
    MoeForward(w, config_, u, ids, n, y, pool_.get());
    return Status::Ok();
  }
  if (ep_->fail_at_layer == moe_layer) {
    ep_->fail_at_layer = -1;
    return Internal("expert parallelism: an injected failure of rank " +
                    std::to_string(ep_->comm->rank()) + " at MoE layer " +
                    std::to_string(moe_layer));
  }
  const MoeParallel par{ep_->comm, &ep_->placements.at(static_cast<size_t>(moe_layer)),
                        ep_->load.at(static_cast<size_t>(moe_layer)).data(),
                        &ep_->served.at(static_cast<size_t>(moe_layer))};
  return MoeForwardParallel(w, config_, u, ids, n, y, pool_.get(), par);
}

Status Model::ForwardIdle(bool mtp) {
  DSINFER_CHECK(ep_ != nullptr);
  if (mtp && weights_->mtp.empty()) return Unimplemented("this checkpoint has no MTP layer");
  const int first = mtp ? config_.num_layers : 0;
  const int last = mtp ? config_.num_layers + 1 : config_.num_layers;
  for (int l = first; l < last; ++l) {
    DSINFER_RETURN_IF_ERROR(Moe(weights_->MoeLayer(l), l, nullptr, nullptr, 0, nullptr));
  }
  return Status::Ok();
}

Status Model::Block(const BlockWeights& w, int layer, const TokenBatch& batch, float* X) {
  const auto& c = config_;
  const int64_t n = batch.size(), D = c.hidden_size, hc = c.hc_mult;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> u(static_cast<size_t>(n * D)), y(static_cast<size_t>(n * D));
  std::vector<float> post(static_cast<size_t>(n * hc)), comb(static_cast<size_t>(n * hc * hc));

  HcPre(w.hc_attn, c, X, n, u.data(), post.data(), comb.data(), pool_.get());
  cpu::RmsNorm(u.data(), n, D, w.attn_norm.data(), eps);
  AttentionForward(w.attn, c, rope_, layer, batch, u.data(), y.data(), pool_.get());
  HcPost(c, y.data(), post.data(), comb.data(), n, X);

  HcPre(w.hc_ffn, c, X, n, u.data(), post.data(), comb.data(), pool_.get());
  cpu::RmsNorm(u.data(), n, D, w.ffn_norm.data(), eps);
  DSINFER_RETURN_IF_ERROR(Moe(w.ffn, layer, u.data(), batch.ids.data(), n, y.data()));
  HcPost(c, y.data(), post.data(), comb.data(), n, X);
  return Status::Ok();
}

std::vector<float> Model::Head(const HyperHeadWeights& hc_head, const std::vector<float>& norm,
                               const float* X, const std::vector<int64_t>& rows) {
  const auto& c = config_;
  const int64_t D = c.hidden_size, hc = c.hc_mult, m = static_cast<int64_t>(rows.size());
  std::vector<float> xs(static_cast<size_t>(m * hc * D)), z(static_cast<size_t>(m * D));
  for (int64_t i = 0; i < m; ++i) std::copy_n(X + rows[i] * hc * D, hc * D, xs.data() + i * hc * D);
  HcHead(hc_head, c, xs.data(), m, z.data(), pool_.get());
  cpu::RmsNorm(z.data(), m, D, norm.data(), static_cast<float>(c.rms_norm_eps));
  std::vector<float> logits(static_cast<size_t>(m * c.vocab_size));
  cpu::Linear(z.data(), m, D, weights_->head.view(), c.vocab_size, logits.data(), pool_.get());
  return logits;
}

namespace {

// Batch layout shared by Forward and ForwardMtp.
TokenBatch MakeBatch(const std::vector<SequenceState*>& states,
                     const std::vector<const std::vector<int32_t>*>& ids,
                     const std::vector<int64_t>& start_positions) {
  TokenBatch b;
  for (size_t s = 0; s < states.size(); ++s) {
    BatchSegment seg{states[s], b.size(), static_cast<int64_t>(ids[s]->size()), start_positions[s]};
    for (size_t i = 0; i < ids[s]->size(); ++i) {
      b.ids.push_back((*ids[s])[i]);
      b.positions.push_back(seg.start_pos + static_cast<int64_t>(i));
    }
    b.segments.push_back(seg);
  }
  return b;
}

// The rows whose logits a forward returns; `tails`: per segment, for LogitsRows::kTail.
std::vector<int64_t> SelectRows(const TokenBatch& b, LogitsRows rows,
                                const std::vector<int64_t>& tails = {}) {
  std::vector<int64_t> r;
  for (size_t s = 0; s < b.segments.size(); ++s) {
    const auto& seg = b.segments[s];
    if (seg.count == 0) continue;
    const int64_t tail = rows == LogitsRows::kAll    ? seg.count
                         : rows == LogitsRows::kLast ? 1
                                                     : std::min(seg.count, tails.at(s));
    for (int64_t i = seg.count - tail; i < seg.count; ++i) r.push_back(seg.begin + i);
  }
  return r;
}

}  // namespace

Status Model::CheckChunks(const std::vector<SequenceChunk>& chunks) const {
  const auto& c = config_;
  std::vector<SequenceState*> states;
  for (const auto& ch : chunks) {
    DSINFER_RETURN_IF_ERROR(CheckIds(ch.ids));
    if (ch.logits_tail < 0) return InvalidArgument("a chunk's logits_tail is negative");
    if (std::find(states.begin(), states.end(), ch.state) != states.end()) {
      return InvalidArgument("a request appears twice in one forward batch");
    }
    if (ch.state->length() + static_cast<int64_t>(ch.ids.size()) > c.max_position_embeddings &&
        c.max_position_embeddings > 0) {
      return OutOfRange("sequence of " +
                        std::to_string(ch.state->length() + static_cast<int64_t>(ch.ids.size())) +
                        " tokens exceeds max_position_embeddings " +
                        std::to_string(c.max_position_embeddings));
    }
    states.push_back(ch.state);
  }
  return Status::Ok();
}

StatusOr<ForwardOutput> Model::Forward(const std::vector<SequenceChunk>& chunks, LogitsRows rows,
                                       bool keep_streams) {
  const auto& c = config_;
  DSINFER_RETURN_IF_ERROR(CheckChunks(chunks));
  std::vector<SequenceState*> states;
  std::vector<const std::vector<int32_t>*> ids;
  std::vector<int64_t> starts, tails;
  for (const auto& ch : chunks) {
    tails.push_back(ch.logits_tail);
    states.push_back(ch.state);
    ids.push_back(&ch.ids);
    starts.push_back(ch.state->length());
  }
  TokenBatch batch = MakeBatch(states, ids, starts);
  const int64_t D = c.hidden_size, hc = c.hc_mult;

  // h = embed[ids], broadcast to the hc streams: X [N, hc, D].
  std::vector<float> X = HcEmbed(weights_->embed, batch.ids, hc, D);
  for (int l = 0; l < c.num_layers; ++l) {
    DSINFER_RETURN_IF_ERROR(Block(weights_->layers[l], l, batch, X.data()));
  }
  for (const auto& seg : batch.segments) seg.state->set_length(seg.start_pos + seg.count);

  ForwardOutput out;
  out.logits = Head(weights_->hc_head, weights_->norm, X.data(), SelectRows(batch, rows, tails));
  if (keep_streams) out.streams = std::move(X);
  return out;
}

Status Model::CheckMtpChunks(const std::vector<MtpChunk>& chunks) const {
  const int64_t width = int64_t{config_.hc_mult} * config_.hidden_size;
  std::vector<SequenceState*> states;
  for (const auto& ch : chunks) {
    if (std::find(states.begin(), states.end(), ch.state) != states.end()) {
      return InvalidArgument("a request appears twice in one MTP batch");
    }
    states.push_back(ch.state);
    DSINFER_RETURN_IF_ERROR(CheckIds(ch.next_ids));
    if (ch.streams.size() != ch.next_ids.size() * static_cast<size_t>(width)) {
      return InvalidArgument("MTP chunk: streams and next_ids sizes disagree");
    }
  }
  return Status::Ok();
}

StatusOr<ForwardOutput> Model::ForwardMtp(const std::vector<MtpChunk>& chunks, LogitsRows rows) {
  if (weights_->mtp.empty()) return Unimplemented("this checkpoint has no MTP layer");
  const auto& c = config_;
  const MtpWeights& mw = weights_->mtp[0];
  const int64_t D = c.hidden_size, hc = c.hc_mult;
  const float eps = static_cast<float>(c.rms_norm_eps);
  DSINFER_RETURN_IF_ERROR(CheckMtpChunks(chunks));
  std::vector<SequenceState*> states;
  std::vector<const std::vector<int32_t>*> ids;
  std::vector<int64_t> starts;
  for (const auto& ch : chunks) {
    states.push_back(ch.state);
    ids.push_back(&ch.next_ids);
    starts.push_back(ch.state->mtp_length());
  }
  TokenBatch batch = MakeBatch(states, ids, starts);
  const int64_t n = batch.size();

  // e = enorm(embed[t_{i+1}]); X[j] = e_proj(e) + h_proj(hnorm(Hm[j])).
  std::vector<float> e(static_cast<size_t>(n * D)), ep(static_cast<size_t>(n * D));
  for (int64_t t = 0; t < n; ++t) {
    weights_->embed.CopyRow(batch.ids[t], e.data() + t * D);
  }
  cpu::RmsNorm(e.data(), n, D, mw.enorm.data(), eps);
  cpu::Linear(e.data(), n, D, mw.e_proj.view(), D, ep.data(), pool_.get());
  std::vector<float> hn;
  for (const auto& ch : chunks) hn.insert(hn.end(), ch.streams.begin(), ch.streams.end());
  cpu::RmsNorm(hn.data(), n * hc, D, mw.hnorm.data(), eps);
  std::vector<float> X(static_cast<size_t>(n * hc * D));
  cpu::Linear(hn.data(), n * hc, D, mw.h_proj.view(), D, X.data(), pool_.get());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < hc; ++j) {
      float* x = X.data() + (t * hc + j) * D;
      for (int64_t i = 0; i < D; ++i) x[i] += ep[t * D + i];
    }
  }
  DSINFER_RETURN_IF_ERROR(Block(mw.block, c.num_layers, batch, X.data()));
  for (const auto& seg : batch.segments) seg.state->set_mtp_length(seg.start_pos + seg.count);

  ForwardOutput out;
  out.logits = Head(mw.hc_head, mw.norm, X.data(), SelectRows(batch, rows));
  out.streams = std::move(X);
  return out;
}

}  // namespace dsinfer::model::deepseek_v4
