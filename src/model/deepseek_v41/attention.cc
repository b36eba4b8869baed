#include "model/deepseek_v41/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "base/check.h"
#include "model/deepseek_v4/latent_attention.h"
#include "model/deepseek_v41/compressor.h"
#include "model/deepseek_v41/indexer.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/quant_sim.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;

using cpu::AttendHead;

void AttentionForward(const AttentionWeights& w, const io::DeepseekV41Config& c,
                      const RopeTables& rope, int layer, TokenBatch& batch, const float* x,
                      float* out, ThreadPool* pool) {
  const int64_t n = batch.size(), D = c.hidden_size, H = c.num_heads, d = c.head_dim;
  const int rd = c.rope_head_dim;
  const int ratio = w.compress_ratio;
  const std::vector<float>& inv_freq = rope.ForRatio(ratio);
  const int64_t* pos = batch.positions.data();

  // ---- q = RoPE(wq_b(q_norm(wq_a(x)))); window K=V = fp8_sim(RoPE(kv_norm(wkv(x)))), also
  // packed for the ring ----
  const deepseek_v4::LatentDims dims = deepseek_v4::LatentDims::Of(c);
  deepseek_v4::LatentInputs in = deepseek_v4::ProjectLatentInputs(w, dims, x, n, pool);
  std::vector<float>& cq = in.cq;  // [N, q_lora_rank]
  std::vector<float>& q = in.q;    // [N, H, d]
  std::vector<float>& kv = in.kv;  // [N, d]
  RopeRows(q.data(), n, H, d, rd, inv_freq, pos, false);
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
  deepseek_v4::ProjectLatentOutput(w, dims, inv_freq, pos, o.data(), n, out, pool);
}

}  // namespace dsinfer::model::deepseek_v41
