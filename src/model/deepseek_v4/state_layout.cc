#include "model/deepseek_v4/state_layout.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dsinfer::model::deepseek_v4 {

StateLayout DeepseekV4StateLayout(const io::DeepseekV4Config& c, int rollback_slack) {
  // (kind, ring_rows, tokens_per_row) -> component; members in layer order.
  std::map<std::tuple<StateKind, int64_t, int64_t>, StateComponent> groups;
  auto add = [&](StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer,
                 StateStream stream, int64_t width) {
    StateComponent& comp = groups[{kind, ring_rows, tokens_per_row}];
    const int64_t offset = comp.floats_per_row();
    comp.members.push_back({layer, static_cast<int>(stream), width, offset});
    comp.bytes_per_row += width * static_cast<int64_t>(sizeof(float));
  };
  for (int i = 0; i <= c.num_layers; ++i) {
    add(StateKind::kWindow, c.sliding_window - 1 + rollback_slack, 1, i, StateStream::kWindow,
        c.head_dim);
    const int64_t rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
    if (rate == 0) continue;
    const bool csa = rate == c.csa_rate;
    const int64_t rows = (csa ? 2 * rate : rate) + rollback_slack;
    const int64_t width = csa ? 2 * c.head_dim : c.head_dim;
    add(StateKind::kCompressor, rows, 1, i, StateStream::kCompressorRows, 2 * width);
    add(StateKind::kCompressed, 0, rate, i, StateStream::kCompressed, c.head_dim);
    if (csa) {
      add(StateKind::kCompressor, rows, 1, i, StateStream::kIndexRows, 2 * 2 * c.index_head_dim);
      add(StateKind::kIndexKeys, 0, rate, i, StateStream::kIndexKeys, c.index_head_dim);
    }
  }
  std::vector<StateComponent> components;
  for (auto& [key, comp] : groups) {
    const auto& [kind, ring_rows, tokens_per_row] = key;
    comp.kind = kind;
    comp.ring_rows = ring_rows;
    comp.tokens_per_row = tokens_per_row;
    comp.name = std::string(StateKindName(kind)) +
                (ring_rows > 0 ? "/ring" + std::to_string(ring_rows)
                               : "/rate" + std::to_string(tokens_per_row));
    components.push_back(std::move(comp));
  }
  return StateLayout(std::move(components));
}

}  // namespace dsinfer::model::deepseek_v4
