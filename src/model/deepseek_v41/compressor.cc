#include "model/deepseek_v41/compressor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"
#include "model/deepseek_v41/quant_sim.h"

namespace dsinfer::model::deepseek_v41 {

namespace cpu = backend::cpu;

void CompressTokens(const CompressorWeights& comp, const IndexerWeights& indexer,
                    const io::DeepseekV41Config& c, const RopeTables& rope, const float* kv,
                    const float* gate, int64_t count, LayerState* st, ThreadPool* pool) {
  const int64_t d = c.head_dim, r = comp.ratio, Id = c.index_head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> latents;  // [G, d] pre-RoPE latents of the entries completed now
  if (r == 1) {
    latents.assign(kv, kv + count * d);
  } else {
    // Buffer the rows, pool every complete group: softmax over the group per channel (fp32).
    for (int64_t i = 0; i < count; ++i) {
      st->pending.insert(st->pending.end(), kv + i * d, kv + (i + 1) * d);
      st->pending.insert(st->pending.end(), gate + i * d, gate + (i + 1) * d);
      if (++st->pending_rows < r) continue;
      std::vector<float> latent(static_cast<size_t>(d));
      const float* rows = st->pending.data();  // [r, 2d]
      for (int64_t ch = 0; ch < d; ++ch) {
        float m = -INFINITY;
        for (int64_t j = 0; j < r; ++j) m = std::max(m, rows[j * 2 * d + d + ch]);
        float den = 0.0f;
        for (int64_t j = 0; j < r; ++j) den += std::exp(rows[j * 2 * d + d + ch] - m);
        float acc = 0.0f;
        for (int64_t j = 0; j < r; ++j) {
          acc += rows[j * 2 * d + ch] * (std::exp(rows[j * 2 * d + d + ch] - m) / den);
        }
        latent[ch] = acc;
      }
      latents.insert(latents.end(), latent.begin(), latent.end());
      st->pending.clear();
      st->pending_rows = 0;
    }
  }
  const int64_t G = static_cast<int64_t>(latents.size()) / d;
  if (G == 0) return;
  cpu::RmsNorm(latents.data(), G, d, comp.norm.data(), eps);
  std::vector<int64_t> pos(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) pos[g] = (st->entries + g) * r;

  // Index keys from the pre-RoPE latent.
  std::vector<float> keys(static_cast<size_t>(G * Id));  // [G, Id]
  cpu::Linear(latents.data(), G, d, indexer.wk.view(), Id, keys.data(), pool);
  cpu::RmsNorm(keys.data(), G, Id, indexer.k_norm.data(), eps);
  RopeRows(keys.data(), G, 1, Id, c.rope_head_dim, rope.compress, pos.data(), false);
  for (int64_t g = 0; g < G; ++g) Fp4BlockSim(keys.data() + g * Id, Id, 32, false);

  // KV entries: RoPE'd latents on the FP4 grid (e4m3 scale per 16 channels).
  RopeRows(latents.data(), G, 1, d, c.rope_head_dim, rope.compress, pos.data(), false);
  for (int64_t g = 0; g < G; ++g) Fp4BlockSim(latents.data() + g * d, d, 16, true);

  st->index_entries.insert(st->index_entries.end(), keys.begin(), keys.end());
  st->comp_entries.insert(st->comp_entries.end(), latents.begin(), latents.end());
  st->entries += G;
}

}  // namespace dsinfer::model::deepseek_v41
