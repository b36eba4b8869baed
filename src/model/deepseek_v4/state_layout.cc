#include "model/deepseek_v4/state_layout.h"

#include "model/paged_state.h"

namespace dsinfer::model::deepseek_v4 {

KvFormat WindowFormat(const io::DeepseekV4Config& c) {
  if (c.kv_cache_dtype != io::KvCacheDtype::kFp8) return KvFormat(KvQuant::kNone, c.head_dim, 0);
  return KvFormat(KvQuant::kFp8BfTail, c.head_dim, 64, c.rope_head_dim);
}

KvFormat IndexKeyFormat(const io::DeepseekV4Config& c) {
  if (c.kv_cache_dtype != io::KvCacheDtype::kFp8) {
    return KvFormat(KvQuant::kNone, c.index_head_dim, 0);
  }
  return KvFormat(KvQuant::kFp4Pow2, c.index_head_dim, 32);
}

StateLayout DeepseekV4StateLayout(const io::DeepseekV4Config& c, int rollback_slack,
                                  int64_t mtp_stream_rows) {
  const int64_t kv_width = WindowFormat(c).row_floats();
  const int64_t key_width = IndexKeyFormat(c).row_floats();
  model::StateLayoutBuilder layout;
  auto add = [&](StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer,
                 StateStream stream, int64_t width) {
    layout.Add(kind, ring_rows, tokens_per_row, layer, static_cast<int>(stream), width);
  };
  for (int i = 0; i <= c.num_layers; ++i) {
    add(StateKind::kWindow, c.sliding_window - 1 + rollback_slack, 1, i, StateStream::kWindow,
        kv_width);
    const int64_t rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
    if (rate == 0) continue;
    const bool csa = rate == c.csa_rate;
    const int64_t rows = (csa ? 2 * rate : rate) + rollback_slack;
    const int64_t width = csa ? 2 * c.head_dim : c.head_dim;
    add(StateKind::kCompressor, rows, 1, i, StateStream::kCompressorRows, 2 * width);
    add(StateKind::kCompressed, 0, rate, i, StateStream::kCompressed, kv_width);
    if (csa) {
      add(StateKind::kCompressor, rows, 1, i, StateStream::kIndexRows, 2 * 2 * c.index_head_dim);
      add(StateKind::kIndexKeys, 0, rate, i, StateStream::kIndexKeys, key_width);
    }
  }
  if (mtp_stream_rows > 0) {
    add(StateKind::kWindow, mtp_stream_rows, 1, c.num_layers, StateStream::kMtpStreams,
        c.hc_mult * c.hidden_size);
  }
  return layout.Build();
}

}  // namespace dsinfer::model::deepseek_v4
