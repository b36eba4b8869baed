#include "model/deepseek_v41/compressor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "model/deepseek_v41/state_layout.h"
#include "model/quant_sim.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;

void CompressTokens(const CompressorWeights& comp, const IndexerWeights& indexer,
                    const io::DeepseekV41Config& c, const RopeTables& rope, const float* kv,
                    const float* gate, int64_t start_pos, int64_t count, LayerState* st,
                    ThreadPool* pool) {
  const int64_t d = c.head_dim, r = comp.ratio, Id = c.index_head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> latents;  // [G, d] pre-RoPE latents of the entries completed now
  if (r == 1) {
    latents.assign(kv, kv + count * d);
  } else {
    // Every token's rows go to the ring by position; each completed group is pooled: a softmax
    // over the group per channel (fp32).
    std::vector<float> row(static_cast<size_t>(2 * d));
    std::vector<const float*> rows(static_cast<size_t>(r));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t p = start_pos + i;
      std::copy_n(kv + i * d, d, row.data());
      std::copy_n(gate + i * d, d, row.data() + d);
      st->comp_rows.Append(row.data());
      if ((p + 1) % r != 0) continue;
      for (int64_t j = 0; j < r; ++j) rows[j] = st->comp_rows.Row(p + 1 - r + j);  // [kv | gate]
      std::vector<float> latent(static_cast<size_t>(d));
      for (int64_t ch = 0; ch < d; ++ch) {
        float m = -INFINITY;
        for (int64_t j = 0; j < r; ++j) m = std::max(m, rows[j][d + ch]);
        float den = 0.0f;
        for (int64_t j = 0; j < r; ++j) den += std::exp(rows[j][d + ch] - m);
        float acc = 0.0f;
        for (int64_t j = 0; j < r; ++j) acc += rows[j][ch] * (std::exp(rows[j][d + ch] - m) / den);
        latent[ch] = acc;
      }
      latents.insert(latents.end(), latent.begin(), latent.end());
    }
  }
  const int64_t G = static_cast<int64_t>(latents.size()) / d;
  if (G == 0) return;
  cpu::RmsNorm(latents.data(), G, d, comp.norm.data(), eps);
  std::vector<int64_t> pos(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) pos[g] = (st->entries() + g) * r;

  // Index keys from the pre-RoPE latent.
  std::vector<float> keys(static_cast<size_t>(G * Id));  // [G, Id]
  cpu::Linear(latents.data(), G, d, indexer.wk.view(), Id, keys.data(), pool);
  cpu::RmsNorm(keys.data(), G, Id, indexer.k_norm.data(), eps);
  RopeRows(keys.data(), G, 1, Id, c.rope_head_dim, rope.compress, pos.data(), false);
  // KV entries: RoPE'd latents.
  RopeRows(latents.data(), G, 1, d, c.rope_head_dim, rope.compress, pos.data(), false);

  // Both onto their FP4 grids, stored packed (state_layout.h).
  const KvFormat key_format = IndexKeyFormat(c), entry_format = EntryFormat(c);
  std::vector<float> packed(
      static_cast<size_t>(std::max(key_format.row_floats(), entry_format.row_floats())));
  for (int64_t g = 0; g < G; ++g) {
    key_format.Pack(keys.data() + g * Id, packed.data());
    st->index_entries.Append(packed.data());
    entry_format.Pack(latents.data() + g * d, packed.data());
    st->comp_entries.Append(packed.data());
  }
}

}  // namespace dsinfer::model::deepseek_v41
