// DeepSeek-V4.1's DSpark drafter on the CPU (model.h; docs/architecture.md "DSpark"). The
// reference is DeepSeek's V4.1 inference code (`DSparkBlock`, `DSparkAttention`,
// `DSparkMarkovHead`, `DSparkConfidenceHead`), run here with the text model's fp32 semantics:
// the same QAT fake-quantizers as the backbone (FP8 context and block K=V rows), no other rounding.
#include <algorithm>
#include <cmath>

#include "backend/cpu/attention.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/latent_attention.h"
#include "model/deepseek_v4/moe.h"
#include "model/deepseek_v41/model.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/quant_sim.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;
using deepseek_v4::HcCollapse;
using deepseek_v4::HcEmbed;

std::vector<int64_t> Model::DraftContextRows(const TokenBatch& batch) const {
  std::vector<int64_t> rows;
  for (const BatchSegment& seg : batch.segments) {
    const int64_t keep = std::min(seg.count, seg.state->draft(0).capacity());
    for (int64_t i = seg.count - keep; i < seg.count; ++i) rows.push_back(seg.begin + i);
  }
  return rows;
}

// The context of a row: main_x = main_norm(main_proj(taps)); per stage s its K=V
// fp8_sim(RoPE(kv_norm_s(wkv_s(main_x)))) at the row's position, as the stage's window rows.
// Only the rows the rings keep are computed (a long prefill chunk's earlier rows would leave the
// rings before they are read).
void Model::WriteDraftContext(const TokenBatch& batch, const std::vector<int64_t>& tap_rows,
                              const std::vector<float>& taps) {
  const auto& c = config_;
  const DSparkWeights& w = *dspark_;
  const int64_t n = static_cast<int64_t>(tap_rows.size()), D = c.hidden_size, d = c.head_dim;
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = batch.positions[tap_rows[i]];
  const int64_t T = static_cast<int64_t>(c.dspark_target_layer_ids.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> main_x(static_cast<size_t>(n * D));  // [n, D]
  std::vector<float> kv(static_cast<size_t>(n * d));      // [n, d] one stage's K=V
  cpu::Linear(taps.data(), n, T * D, w.main_proj.view(), D, main_x.data(), pool_.get());
  cpu::RmsNorm(main_x.data(), n, D, w.main_norm.data(), eps);
  const KvFormat format = WindowFormat(c);
  std::vector<float> row(static_cast<size_t>(format.row_floats()));
  for (int s = 0; s < c.num_nextn_predict_layers; ++s) {
    const auto& a = w.stages[static_cast<size_t>(s)].attn;
    cpu::Linear(main_x.data(), n, D, a.wkv.view(), d, kv.data(), pool_.get());
    cpu::RmsNorm(kv.data(), n, d, a.kv_norm.data(), eps);
    RopeRows(kv.data(), n, 1, d, c.rope_head_dim, rope_.main, positions.data(), false);
    int64_t i = 0;  // the segments' kept rows, in order
    for (const BatchSegment& seg : batch.segments) {
      PositionRing& ring = seg.state->draft(s);
      DSINFER_CHECK(ring.end() == seg.start_pos);
      const int64_t keep = std::min(seg.count, ring.capacity());
      if (keep < seg.count) ring.Restart(seg.start_pos + seg.count - keep);
      for (int64_t k = 0; k < keep; ++k, ++i) {
        format.Pack(kv.data() + i * d, row.data());
        ring.Append(row.data());
      }
    }
  }
}

StatusOr<std::vector<DSparkDraft>> Model::DraftDSpark(const std::vector<DSparkRequest>& requests,
                                                      bool logits) {
  if (!dspark_) return InvalidArgument("the model was loaded without its DSpark drafter");
  const auto& c = config_;
  const DSparkWeights& w = *dspark_;
  const int64_t R = static_cast<int64_t>(requests.size()), B = c.dspark_block_size;
  const int64_t n = R * B, D = c.hidden_size, hc = c.hc_mult, H = c.num_heads, d = c.head_dim;
  const int64_t V = c.vocab_size, r = c.dspark_markov_rank, W = c.sliding_window;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // The R blocks' rows, request-major: ids and positions [R * B].
  std::vector<int32_t> ids(static_cast<size_t>(n), static_cast<int32_t>(c.dspark_noise_token_id));
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t q = 0; q < R; ++q) {
    const DSparkRequest& req = requests[static_cast<size_t>(q)];
    if (req.state == nullptr || req.state->draft_stages() != c.num_nextn_predict_layers ||
        req.state->length() < 1) {
      return InvalidArgument("DSpark drafts after a sequence with state (and its draft rings)");
    }
    DSINFER_RETURN_IF_ERROR(CheckIds({req.anchor}));
    ids[q * B] = req.anchor;
    for (int64_t k = 0; k < B; ++k) pos[q * B + k] = req.state->length() + k;
  }

  // The block on every stream; the first site collapses stream 0 (the stages chain their mixes).
  std::vector<float> X = HcEmbed(weights_->embed, ids, hc, D);  // [n, hc, D]
  std::vector<float> pre(static_cast<size_t>(n * hc), 0.0f);    // [n, hc] the incoming pre
  for (int64_t t = 0; t < n; ++t) pre[t * hc] = 1.0f;
  std::vector<float> o(static_cast<size_t>(n * H * d));  // [n, H, d] attention output
  const deepseek_v4::LatentDims dims = deepseek_v4::LatentDims::Of(c);
  const KvFormat format = WindowFormat(c);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int s = 0; s < c.num_nextn_predict_layers; ++s) {
    const DSparkStageWeights& st = w.stages[static_cast<size_t>(s)];
    // Attention: each slot's queries against the last W context rows and the whole block.
    const auto attention = [&](const float* u, float* y) {
      deepseek_v4::LatentInputs in =
          deepseek_v4::ProjectLatentInputs(st.attn, dims, u, n, pool_.get());
      RopeRows(in.q.data(), n, H, d, c.rope_head_dim, rope_.main, pos.data(), false);
      RopeRows(in.kv.data(), n, 1, d, c.rope_head_dim, rope_.main, pos.data(), false);
      // The block's K=V onto the FP8 grid, as the context rows (not stored).
      for (int64_t t = 0; t < n; ++t) Fp8BlockSim(in.kv.data() + t * d, d, 32);
      for (int64_t q = 0; q < R; ++q) {
        const PositionRing& ring = requests[static_cast<size_t>(q)].state->draft(s);
        const int64_t end = ring.end(), first = std::max<int64_t>(0, end - W);
        std::vector<float> context(static_cast<size_t>((end - first) * d));  // [rows, d]
        for (int64_t p = first; p < end; ++p)
          format.Unpack(ring.Row(p), context.data() + (p - first) * d);
        std::vector<const float*> keys;
        for (int64_t p = first; p < end; ++p) keys.push_back(context.data() + (p - first) * d);
        for (int64_t k = 0; k < B; ++k) keys.push_back(in.kv.data() + (q * B + k) * d);
        pool_->ParallelFor(B * H, [&](int64_t b, int64_t e) {
          std::vector<float> scores(keys.size());
          for (int64_t i = b; i < e; ++i) {
            const int64_t t = q * B + i / H, h = i % H;
            cpu::AttendHead(in.q.data() + (t * H + h) * d, keys, d, scale, st.attn.attn_sink[h],
                            scores.data(), o.data() + (t * H + h) * d);
          }
        });
      }
      deepseek_v4::ProjectLatentOutput(st.attn, dims, rope_.main, pos.data(), o.data(), n, y,
                                       pool_.get());
    };
    const auto ffn = [&](const float* u, float* y) {
      deepseek_v4::MoeForward(st.ffn, draft_mixing_, u, ids.data(), n, y, pool_.get());
    };
    RunSites(st, draft_mixing_, X.data(), pre.data(), n, attention, ffn, pool_.get());
  }

  // Head: the collapse with the last site's pre (xh, pre-norm), norm, the trunk's head.
  std::vector<float> xh(static_cast<size_t>(n * D));  // [n, D] before the norm
  HcCollapse(draft_mixing_, X.data(), pre.data(), n, xh.data());
  std::vector<float> u = xh;  // [n, D] normed
  cpu::RmsNorm(u.data(), n, D, w.norm.data(), eps);
  std::vector<float> base(static_cast<size_t>(n * V));  // [n, V]
  cpu::Linear(u.data(), n, D, weights_->head.view(), V, base.data(), pool_.get());

  // The Markov term of the previous token and the confidence, slot by slot.
  std::vector<DSparkDraft> out(static_cast<size_t>(R));
  std::vector<float> e(static_cast<size_t>(r));  // [r] the previous token's Markov embedding
  std::vector<float> bias(static_cast<size_t>(V)), row(static_cast<size_t>(V));  // [V]
  for (int64_t q = 0; q < R; ++q) {
    DSparkDraft& dr = out[static_cast<size_t>(q)];
    int32_t prev = requests[static_cast<size_t>(q)].anchor;
    for (int64_t k = 0; k < B; ++k) {
      const int64_t t = q * B + k;
      std::copy_n(base.data() + t * V, V, row.data());
      if (r > 0) {
        w.markov_embed.CopyRow(prev, e.data());
        cpu::Linear(e.data(), 1, r, w.markov_head.view(), V, bias.data(), pool_.get());
        for (int64_t v = 0; v < V; ++v) row[v] += bias[v];
      }
      int32_t best = 0;
      for (int64_t v = 1; v < V; ++v) {
        if (row[v] > row[best]) best = static_cast<int32_t>(v);
      }
      double conf = 0.0;
      for (int64_t k2 = 0; k2 < D; ++k2) conf += double{w.confidence[k2]} * xh[t * D + k2];
      for (int64_t k2 = 0; k2 < r; ++k2) conf += double{w.confidence[D + k2]} * e[k2];
      dr.ids.push_back(best);
      dr.confidence.push_back(static_cast<float>(conf));
      if (logits) {
        dr.logits.insert(dr.logits.end(), row.begin(), row.end());
        dr.base.insert(dr.base.end(), base.begin() + t * V, base.begin() + (t + 1) * V);
      }
      prev = best;
    }
  }
  return out;
}

}  // namespace dsinfer::model::deepseek_v41
