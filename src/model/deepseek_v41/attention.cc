#include "model/deepseek_v41/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v41/compressor.h"
#include "model/deepseek_v41/indexer.h"
#include "model/deepseek_v41/quant_sim.h"
#include "model/deepseek_v41/state_layout.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;

namespace {

// One query head over a key list with a sink logit: o = Σ softmax([z_j, sink])_j · k_j.
void AttendHead(const float* q, const std::vector<const float*>& keys, int64_t d, float scale,
                float sink, float* logits, float* o) {
  const int64_t n = static_cast<int64_t>(keys.size());
  float m = sink;
  for (int64_t j = 0; j < n; ++j) {
    logits[j] = cpu::Dot(q, keys[j], d) * scale;
    m = std::max(m, logits[j]);
  }
  float den = std::exp(sink - m);
  for (int64_t j = 0; j < n; ++j) {
    logits[j] = std::exp(logits[j] - m);
    den += logits[j];
  }
  const float inv = 1.0f / den;
  std::fill(o, o + d, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = logits[j] * inv;
    const float* k = keys[j];
    for (int64_t i = 0; i < d; ++i) o[i] += p * k[i];
  }
}

}  // namespace

void AttentionForward(const AttentionWeights& w, const io::DeepseekV41Config& c,
                      const RopeTables& rope, int layer, TokenBatch& batch, const float* x,
                      float* out, ThreadPool* pool) {
  const int64_t n = batch.size(), D = c.hidden_size, H = c.num_heads, d = c.head_dim;
  const int rd = c.rope_head_dim;
  const int ratio = w.compress_ratio;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::vector<float>& inv_freq = rope.ForRatio(ratio);
  const int64_t* pos = batch.positions.data();

  // ---- query: q = RoPE(wq_b(q_norm(wq_a(x)))) ----
  std::vector<float> cq(static_cast<size_t>(n * c.q_lora_rank));  // [N, q_lora_rank]
  cpu::Linear(x, n, D, w.wq_a.view(), c.q_lora_rank, cq.data(), pool);
  cpu::RmsNorm(cq.data(), n, c.q_lora_rank, w.q_norm.data(), eps);
  std::vector<float> q(static_cast<size_t>(n * H * d));  // [N, H, d]
  cpu::Linear(cq.data(), n, c.q_lora_rank, w.wq_b.view(), H * d, q.data(), pool);
  RopeRows(q.data(), n, H, d, rd, inv_freq, pos, false);

  // ---- window K=V: fp8_sim(RoPE(kv_norm(wkv(x)))), also packed for the ring ----
  std::vector<float> kv(static_cast<size_t>(n * d));  // [N, d]
  cpu::Linear(x, n, D, w.wkv.view(), d, kv.data(), pool);
  cpu::RmsNorm(kv.data(), n, d, w.kv_norm.data(), eps);
  RopeRows(kv.data(), n, 1, d, rd, inv_freq, pos, false);
  const KvFormat window_format = WindowFormat(c);
  const int64_t wf = window_format.row_floats();
  std::vector<float> kv_packed(static_cast<size_t>(n * wf));  // [N, window row]
  for (int64_t t = 0; t < n; ++t) window_format.Pack(kv.data() + t * d, kv_packed.data() + t * wf);

  // ---- compressor projections (KV sources) and indexer queries (index sources) ----
  const CompressorWeights* comp = w.compressor.get();
  const IndexerWeights* idx = w.indexer.get();
  const int64_t IH = c.index_n_heads, Id = c.index_head_dim;
  std::vector<float> ckv, cgate, qi, wi;
  if (comp) {
    ckv.resize(static_cast<size_t>(n * d));  // [N, d]
    cpu::Linear(x, n, D, comp->wkv.view(), d, ckv.data(), pool);
    if (comp->ratio > 1) {
      cgate.resize(static_cast<size_t>(n * d));  // [N, d]
      cpu::Linear(x, n, D, comp->wgate.view(), d, cgate.data(), pool);
    }
  }
  if (idx) {
    qi.resize(static_cast<size_t>(n * IH * Id));  // [N, IH, Id]
    cpu::Linear(cq.data(), n, c.q_lora_rank, idx->wq_b.view(), IH * Id, qi.data(), pool);
    RopeRows(qi.data(), n, IH, Id, rd, rope.compress, pos, false);
    for (int64_t t = 0; t < n * IH; ++t) Fp4BlockSim(qi.data() + t * Id, Id, 32, false);
    wi.resize(static_cast<size_t>(n * IH));  // [N, IH]
    cpu::Linear(x, n, D, idx->weights_proj.view(), IH, wi.data(), pool);
    const float head_scale = 1.0f / std::sqrt(static_cast<float>(IH));
    for (float& v : wi) v *= head_scale;
  }
  const bool is_candidate_source = layer == c.candidate_source_layer_id;
  const bool uses_candidates =
      c.candidate_source_layer_id >= 0 && c.candidate_source_layer_id < layer;

  // ---- per request: emit entries, select, attend ----
  std::vector<float> o(static_cast<size_t>(n * H * d));  // [N, H, d]
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t W = c.sliding_window;
  const KvFormat entry_format = EntryFormat(c);
  for (BatchSegment& seg : batch.segments) {
    LayerState& st = seg.state->layer(layer);
    LayerState* group = ratio > 0 ? &seg.state->layer(c.KvSourceOf(layer)) : nullptr;
    if (comp) {
      DSINFER_CHECK(idx && idx->owns_k);  // Validate(): every KV source is an index source
      CompressTokens(*comp, *idx, c, rope, ckv.data() + seg.begin * d,
                     cgate.empty() ? nullptr : cgate.data() + seg.begin * d, seg.start_pos,
                     seg.count, &st, pool);
    }
    GroupShared& sh = seg.shared;
    if (idx) {
      // The group's index keys, unpacked once per forward (the Reindex layers after the source
      // score the same keys).
      const int source = c.KvSourceOf(layer);
      if (sh.keys_source != source) {
        const KvFormat key_format = IndexKeyFormat(c);
        sh.keys.resize(static_cast<size_t>(group->entries() * Id));
        for (int64_t g = 0; g < group->entries(); ++g) {
          key_format.Unpack(group->index_entries.Row(g), sh.keys.data() + g * Id);
        }
        sh.keys_source = source;
      }
      sh.topk.assign(static_cast<size_t>(seg.count), {});
      if (is_candidate_source) sh.candidates.assign(static_cast<size_t>(seg.count), {});
      const bool masked = uses_candidates && sh.has_candidates;
      pool->ParallelFor(seg.count, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t t = seg.begin + i, p = seg.start_pos + i;
          const int64_t visible = std::min<int64_t>((p + 1) / ratio, group->entries());
          std::vector<float> scores =
              IndexScores(qi.data() + t * IH * Id, wi.data() + t * IH, static_cast<int>(IH),
                          static_cast<int>(Id), sh.keys.data(), visible);
          if (is_candidate_source) {
            sh.candidates[i] =
                SelectCandidateBlocks(scores, c.candidate_topk_blocks, c.candidate_block_size);
          }
          sh.topk[i] = SelectTopK(scores, c.index_topk, masked ? &sh.candidates[i] : nullptr,
                                  c.candidate_block_size);
        }
      });
      sh.has_topk = true;
      if (is_candidate_source) sh.has_candidates = true;
    }
    // Window rows before the chunk come from the ring (unpacked), the chunk's from kv.
    const int64_t start = seg.start_pos;
    const int64_t first = std::max<int64_t>(0, start - W + 1);
    std::vector<float> before(static_cast<size_t>((start - first) * d));  // [start - first, d]
    for (int64_t p = first; p < start; ++p) {
      window_format.Unpack(st.window.Row(p), before.data() + (p - first) * d);
    }
    auto window_row = [&](int64_t p) -> const float* {
      return p >= start ? kv.data() + (seg.begin + p - start) * d : before.data() + (p - first) * d;
    };
    pool->ParallelFor(seg.count, [&](int64_t b, int64_t e) {
      std::vector<const float*> keys;
      std::vector<float> logits, picked;  // picked: [top-k, d] the selected entries, unpacked
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = seg.begin + i, p = start + i;
        keys.clear();
        for (int64_t s = std::max<int64_t>(0, p - W + 1); s <= p; ++s)
          keys.push_back(window_row(s));
        if (group && sh.has_topk) {
          picked.resize(sh.topk[i].size() * static_cast<size_t>(d));
          for (size_t j = 0; j < sh.topk[i].size(); ++j) {
            entry_format.Unpack(group->comp_entries.Row(sh.topk[i][j]), picked.data() + j * d);
            keys.push_back(picked.data() + j * d);
          }
        }
        logits.resize(keys.size());
        for (int64_t h = 0; h < H; ++h) {
          AttendHead(q.data() + (t * H + h) * d, keys, d, scale, w.attn_sink[h], logits.data(),
                     o.data() + (t * H + h) * d);
        }
      }
    });
    for (int64_t i = 0; i < seg.count; ++i)
      st.window.Append(kv_packed.data() + (seg.begin + i) * wf);
  }

  // ---- de-rotate at the query position, grouped output projection ----
  RopeRows(o.data(), n, H, d, rd, inv_freq, pos, true);
  const int64_t G = c.o_groups, olr = c.o_lora_rank, group_in = H * d / G;
  std::vector<float> z(static_cast<size_t>(n * G * olr));  // [N, G * o_lora_rank]
  for (int64_t g = 0; g < G; ++g) {
    cpu::Gemm(o.data() + g * group_in, n, group_in, H * d, w.wo_a.view().Offset(g * olr, group_in),
              olr, z.data() + g * olr, G * olr, pool);
  }
  cpu::Linear(z.data(), n, G * olr, w.wo_b.view(), D, out, pool);
}

}  // namespace dsinfer::model::deepseek_v41
