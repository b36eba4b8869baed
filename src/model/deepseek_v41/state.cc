#include "model/deepseek_v41/state.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace dsinfer::model::deepseek_v41 {

SequenceState::SequenceState(const io::DeepseekV41Config& config, int rollback_slack)
    : rollback_slack_(rollback_slack) {
  const cache::StateLayout layout = DeepseekV41StateLayout(config, rollback_slack);
  own_pages_ = std::make_unique<HeapStatePages>(layout);
  Bind(config, layout, own_pages_.get());
}

SequenceState::SequenceState(const io::DeepseekV41Config& config, int rollback_slack,
                             const cache::StateLayout& layout, StatePages* pages)
    : rollback_slack_(rollback_slack) {
  Bind(config, layout, pages);
}

void SequenceState::Bind(const io::DeepseekV41Config& c, const cache::StateLayout& layout,
                         StatePages* pages) {
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    layers_[l].ratio = c.compress_ratios[l];
    layers_[l].source = c.IsKvSource(l);
  }
  const auto& comps = layout.components();
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    for (const StateMember& m : comps[ci].members) {
      PagedRows rows(pages, static_cast<int>(ci), m.offset, m.width);
      LayerState& s = layers_[m.layer];
      switch (static_cast<StateStream>(m.stream)) {
        case StateStream::kWindow:
          s.window = PositionRing(rows, comps[ci].ring_rows);
          break;
        case StateStream::kCompressorRows:
          s.comp_rows = PositionRing(rows, comps[ci].ring_rows);
          break;
        case StateStream::kCompressed:
          s.comp_entries = EntryList(rows);
          break;
        case StateStream::kIndexKeys:
          s.index_entries = EntryList(rows);
          break;
      }
    }
  }
}

Status SequenceState::Rollback(int64_t new_length) {
  if (new_length < 0 || new_length > length_) {
    return InvalidArgument("rollback to " + std::to_string(new_length) + " of a sequence of " +
                           std::to_string(length_));
  }
  if (length_ - new_length > rollback_slack_) {
    return OutOfRange("rollback of " + std::to_string(length_ - new_length) +
                      " tokens exceeds the slack of " + std::to_string(rollback_slack_));
  }
  for (LayerState& s : layers_) {
    if (s.window.end() > new_length) s.window.Truncate(new_length);
    if (!s.source) continue;
    if (s.ratio > 1 && s.comp_rows.end() > new_length) s.comp_rows.Truncate(new_length);
    const int64_t keep = std::min(s.comp_entries.count(), new_length / s.ratio);
    s.comp_entries.Truncate(keep);
    s.index_entries.Truncate(keep);
  }
  length_ = new_length;
  return Status::Ok();
}

void SequenceState::CopyFrom(const SequenceState& other) {
  DSINFER_CHECK(other.layers_.size() == layers_.size() && other.rollback_slack_ == rollback_slack_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& s = layers_[i];
    const LayerState& o = other.layers_[i];
    s.window.CopyFrom(o.window);
    if (!s.source) continue;
    if (s.ratio > 1) s.comp_rows.CopyFrom(o.comp_rows);
    s.comp_entries.CopyFrom(o.comp_entries);
    s.index_entries.CopyFrom(o.index_entries);
  }
  length_ = other.length_;
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const LayerState& s : layers_) {
    n += s.window.bytes();
    if (!s.source) continue;
    if (s.ratio > 1) n += s.comp_rows.bytes();
    n += s.comp_entries.bytes() + s.index_entries.bytes();
  }
  return n;
}

}  // namespace dsinfer::model::deepseek_v41
