#include "model/deepseek_v4/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/latent_attention.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

using cpu::AttendHead;
using cpu::RopeRows;

void AttentionForward(const AttentionWeights& w, const io::DeepseekV4Config& c,
                      const RopeTables& rope, int layer, const TokenBatch& batch, const float* x,
                      float* out, ThreadPool* pool) {
  const int64_t n = batch.size(), D = c.hidden_size, H = c.num_heads, d = c.head_dim;
  const int rd = c.rope_head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::vector<float>& inv_freq = rope.ForRate(w.compress_rate);
  const int64_t* pos = batch.positions.data();

  // ---- cq = q_norm(x·wq_aᵀ); q = per-head-RMS(cq·wq_bᵀ) with RoPE; K=V = kv_norm(x·wkvᵀ) with
  // RoPE ----
  const LatentDims dims = LatentDims::Of(c);
  LatentInputs in = ProjectLatentInputs(w, dims, x, n, pool);
  std::vector<float>& cq = in.cq;  // [N, q_lora_rank]
  std::vector<float>& q = in.q;    // [N, H, d]
  std::vector<float>& kv = in.kv;  // [N, d]
  cpu::RmsNorm(q.data(), n * H, d, nullptr, eps);
  RopeRows(q.data(), n, H, d, rd, inv_freq, pos, false);
  RopeRows(kv.data(), n, 1, d, rd, inv_freq, pos, false);
  // The FP8 cache (c.kv_cache_dtype): K=V rounded as the ring stores it (fp8_ds_mla), the chunk's
  // own rows read as rounded; the attention then in the official kernel's bf16 (AttendHeadBf16).
  const KvFormat kv_format = WindowFormat(c), key_format = IndexKeyFormat(c);
  const bool fp8 = c.kv_cache_dtype == io::KvCacheDtype::kFp8;
  const int64_t kvf = kv_format.row_floats();
  std::vector<float> kv_rows(static_cast<size_t>(n * kvf));  // [N, ring row]
  for (int64_t t = 0; t < n; ++t) kv_format.Pack(kv.data() + t * d, kv_rows.data() + t * kvf);

  // ---- compressor and indexer projections ----
  std::vector<float> proj, iproj, qi, wi;
  const CompressorWeights* comp = w.compressor.get();
  const IndexerWeights* idx = w.indexer.get();
  const int64_t IH = c.index_n_heads, Id = c.index_head_dim;
  if (comp) {
    proj.resize(static_cast<size_t>(n * comp->wkv_wgate.rows));  // [N, 2*width]
    cpu::Linear(x, n, D, comp->wkv_wgate.view(), comp->wkv_wgate.rows, proj.data(), pool);
    AddPositionBias(*comp, pos, n, proj.data());
  }
  if (idx) {
    const CompressorWeights& ic = idx->compressor;
    iproj.resize(static_cast<size_t>(n * ic.wkv_wgate.rows));
    cpu::Linear(x, n, D, ic.wkv_wgate.view(), ic.wkv_wgate.rows, iproj.data(), pool);
    AddPositionBias(ic, pos, n, iproj.data());
    qi.resize(static_cast<size_t>(n * IH * Id));  // [N, IH, Id]
    cpu::Linear(cq.data(), n, c.q_lora_rank, idx->wq_b.view(), IH * Id, qi.data(), pool);
    RopeRows(qi.data(), n, IH, Id, rd, rope.compress, pos, false);
    if (fp8) {  // the keys' rotation and FP4 grid (spec §2.7)
      for (int64_t r = 0; r < n * IH; ++r) {
        HadamardRotate(qi.data() + r * Id, Id);
        Fp4BlockSim(qi.data() + r * Id, Id, 32, false);
      }
    }
    wi.resize(static_cast<size_t>(n * IH));  // [N, IH]
    cpu::Linear(x, n, D, idx->weights_proj.view(), IH, wi.data(), pool);
    const float head_scale = 1.0f / std::sqrt(static_cast<float>(IH));
    for (float& v : wi) v *= head_scale;
  }

  // ---- per request: emit compressed entries, pick entries, attend ----
  std::vector<float> o(static_cast<size_t>(n * H * d));  // [N, H, d]
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Rows of packed lists (every index key, HCA's entries: each is read by every query), unpacked
  // once per segment; unquantized rows are read in place.
  std::vector<float> before, entries, keys_unpacked;
  auto rows_of = [](const EntryList& list, const KvFormat& f, std::vector<float>* buf) {
    const int64_t count = list.count(), width = f.values();
    std::vector<const float*> rows(static_cast<size_t>(count));
    if (f.packed()) buf->resize(static_cast<size_t>(count * width));
    for (int64_t e = 0; e < count; ++e) {
      if (!f.packed()) {
        rows[e] = list.Row(e);
        continue;
      }
      f.Unpack(list.Row(e), buf->data() + e * width);
      rows[e] = buf->data() + e * width;
    }
    return rows;
  };
  for (const BatchSegment& seg : batch.segments) {
    LayerState& st = seg.state->layer(layer);
    if (comp) {
      CompressSegment(*comp, proj.data() + seg.begin * comp->wkv_wgate.rows, seg.start_pos,
                      seg.count, rope.compress, rd, eps, kv_format, false, &st.comp_rows,
                      &st.comp_entries);
    }
    std::vector<const float*> entry_rows, key_rows;
    if (idx) {
      const CompressorWeights& ic = idx->compressor;
      CompressSegment(ic, iproj.data() + seg.begin * ic.wkv_wgate.rows, seg.start_pos, seg.count,
                      rope.compress, rd, eps, key_format, fp8, &st.index_rows, &st.index_entries);
      key_rows = rows_of(st.index_entries, key_format, &keys_unpacked);
    }
    if (comp && !idx) entry_rows = rows_of(st.comp_entries, kv_format, &entries);  // HCA
    // Window rows before the chunk come from the ring, the chunk's from kv (rounded as stored).
    const int64_t start = seg.start_pos;
    const int64_t first = std::max<int64_t>(0, start - c.sliding_window + 1);
    before.resize(static_cast<size_t>((start - first) * d));  // [start - first, d]
    for (int64_t p = first; p < start; ++p) {
      kv_format.Unpack(st.window.Row(p), before.data() + (p - first) * d);
    }
    auto window_row = [&](int64_t p) -> const float* {
      return p >= start ? kv.data() + (seg.begin + p - start) * d : before.data() + (p - first) * d;
    };
    pool->ParallelFor(seg.count, [&](int64_t b, int64_t e) {
      std::vector<const float*> keys;
      std::vector<float> logits, picked;  // picked: [top-k, d] CSA's selected entries, unpacked
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = seg.begin + i, p = start + i;
        keys.clear();
        for (int64_t s = std::max<int64_t>(0, p - c.sliding_window + 1); s <= p; ++s) {
          keys.push_back(window_row(s));
        }
        if (comp) {
          const int64_t visible = (p + 1) / comp->rate;
          if (idx) {
            const std::vector<int32_t> sel =
                IndexerTopK(qi.data() + t * IH * Id, wi.data() + t * IH, static_cast<int>(IH),
                            static_cast<int>(Id), key_rows, visible, c.index_topk, fp8);
            picked.resize(kv_format.packed() ? sel.size() * static_cast<size_t>(d) : 0);
            for (size_t k = 0; k < sel.size(); ++k) {
              if (!kv_format.packed()) {
                keys.push_back(st.comp_entries.Row(sel[k]));
                continue;
              }
              kv_format.Unpack(st.comp_entries.Row(sel[k]), picked.data() + k * d);
              keys.push_back(picked.data() + k * d);
            }
          } else {
            for (int64_t ent = 0; ent < visible; ++ent) keys.push_back(entry_rows[ent]);
          }
        }
        logits.resize(keys.size());
        for (int64_t h = 0; h < H; ++h) {
          const float* qh = q.data() + (t * H + h) * d;
          float* oh = o.data() + (t * H + h) * d;
          if (fp8) {  // the official kernel's precision: bf16 q and P (AttendHeadBf16)
            cpu::AttendHeadBf16(qh, keys, d, scale, w.attn_sink[h], oh);
          } else {
            AttendHead(qh, keys, d, scale, w.attn_sink[h], logits.data(), oh);
          }
        }
      }
    });
    for (int64_t i = 0; i < seg.count; ++i)
      st.window.Append(kv_rows.data() + (seg.begin + i) * kvf);
  }

  // ---- de-rotate at the query position, grouped output projection ----
  ProjectLatentOutput(w, dims, inv_freq, pos, o.data(), n, out, pool);
}

}  // namespace dsinfer::model::deepseek_v4
