#include "model/deepseek_v41/state_layout.h"

#include <algorithm>

#include "base/check.h"
#include "model/paged_state.h"

namespace dsinfer::model::deepseek_v41 {

using cache::StateKind;

KvFormat WindowFormat(const io::DeepseekV41Config& c) {
  return KvFormat(KvQuant::kFp8Pow2, c.head_dim, 32);
}
KvFormat EntryFormat(const io::DeepseekV41Config& c) {
  return KvFormat(KvQuant::kFp4E4m3, c.head_dim, 16);
}
KvFormat IndexKeyFormat(const io::DeepseekV41Config& c) {
  return KvFormat(KvQuant::kFp4Pow2, c.index_head_dim, 32);
}

cache::StateLayout DeepseekV41StateLayout(const io::DeepseekV41Config& c, int rollback_slack,
                                          bool dspark) {
  model::StateLayoutBuilder layout;
  auto add = [&](StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer,
                 StateStream stream, int64_t width) {
    layout.Add(kind, ring_rows, tokens_per_row, layer, static_cast<int>(stream), width);
  };
  const int64_t window_rows = std::max<int64_t>(1, c.sliding_window - 1 + rollback_slack);
  for (int l = 0; l < c.num_layers; ++l) {
    add(StateKind::kWindow, window_rows, 1, l, StateStream::kWindow, WindowFormat(c).row_floats());
    if (!c.IsKvSource(l)) continue;
    const int r = c.compress_ratios[l];
    if (r > 1) {
      add(StateKind::kCompressor, r + rollback_slack, 1, l, StateStream::kCompressorRows,
          2 * int64_t{c.head_dim});
    }
    add(StateKind::kCompressed, 0, r, l, StateStream::kCompressed, EntryFormat(c).row_floats());
    add(StateKind::kIndexKeys, 0, r, l, StateStream::kIndexKeys, IndexKeyFormat(c).row_floats());
  }
  if (!c.engram_layer_ids.empty()) {
    layout.Add(StateKind::kWindow, std::max(1, c.engram_max_ngram_size - 1) + rollback_slack, 1, 0,
               kTokenStream, 1);
  }
  if (dspark) {
    DSINFER_CHECK(c.has_dspark());
    // The drafter reads the W positions before its block, after a rollback of up to the slack.
    for (int s = 0; s < c.num_nextn_predict_layers; ++s) {
      layout.Add(StateKind::kWindow, c.sliding_window + int64_t{rollback_slack}, 1, s, kDraftStream,
                 WindowFormat(c).row_floats());
    }
  }
  return layout.Build();
}

}  // namespace dsinfer::model::deepseek_v41
