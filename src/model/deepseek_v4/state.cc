#include "model/deepseek_v4/state.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace dsinfer::model::deepseek_v4 {

SequenceState::SequenceState(const io::DeepseekV4Config& config, int rollback_slack)
    : rollback_slack_(rollback_slack) {
  const StateLayout layout = DeepseekV4StateLayout(config, rollback_slack);
  own_pages_ = std::make_unique<HeapStatePages>(layout);
  Bind(config, layout, own_pages_.get());
}

SequenceState::SequenceState(const io::DeepseekV4Config& config, int rollback_slack,
                             const StateLayout& layout, StatePages* pages)
    : rollback_slack_(rollback_slack) {
  Bind(config, layout, pages);
}

void SequenceState::Bind(const io::DeepseekV4Config& c, const StateLayout& layout,
                         StatePages* pages) {
  layers_.resize(c.num_layers + 1);
  for (int i = 0; i <= c.num_layers; ++i) {
    layers_[i].compress_rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
  }
  const auto& comps = layout.components();
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    for (const StateMember& m : comps[ci].members) {
      PagedRows rows(pages, static_cast<int>(ci), m.offset, m.width);
      LayerState& s = layers_[m.layer];
      switch (static_cast<StateStream>(m.stream)) {
        case StateStream::kWindow: s.window = PositionRing(rows, comps[ci].ring_rows); break;
        case StateStream::kCompressorRows: s.comp_rows = PositionRing(rows, comps[ci].ring_rows); break;
        case StateStream::kIndexRows: s.index_rows = PositionRing(rows, comps[ci].ring_rows); break;
        case StateStream::kCompressed: s.comp_entries = EntryList(rows); break;
        case StateStream::kIndexKeys:
          s.index_entries = EntryList(rows);
          s.has_index = true;
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
  const int64_t new_mtp = std::min(mtp_length_, new_length);
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& s = layers_[i];
    const int64_t n = i + 1 == layers_.size() ? new_mtp : new_length;
    if (s.window.end() > n) s.window.Truncate(n);
    if (s.compress_rate == 0) continue;
    if (s.comp_rows.end() > n) s.comp_rows.Truncate(n);
    s.comp_entries.Truncate(std::min(s.comp_entries.count(), n / s.compress_rate));
    if (s.has_index) {
      if (s.index_rows.end() > n) s.index_rows.Truncate(n);
      s.index_entries.Truncate(std::min(s.index_entries.count(), n / s.compress_rate));
    }
  }
  length_ = new_length;
  mtp_length_ = new_mtp;
  return Status::Ok();
}

Status SequenceState::RollbackMtp(int64_t new_mtp_length) {
  if (new_mtp_length < 0 || new_mtp_length > mtp_length_) {
    return InvalidArgument("MTP rollback to " + std::to_string(new_mtp_length) + " of " +
                           std::to_string(mtp_length_) + " rows");
  }
  if (mtp_length_ - new_mtp_length > rollback_slack_) {
    return OutOfRange("MTP rollback of " + std::to_string(mtp_length_ - new_mtp_length) +
                      " rows exceeds the slack of " + std::to_string(rollback_slack_));
  }
  LayerState& s = layers_.back();
  if (s.window.end() > new_mtp_length) s.window.Truncate(new_mtp_length);
  mtp_length_ = new_mtp_length;
  return Status::Ok();
}

void SequenceState::CopyFrom(const SequenceState& other) {
  DSINFER_CHECK(other.layers_.size() == layers_.size() && other.rollback_slack_ == rollback_slack_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& s = layers_[i];
    const LayerState& o = other.layers_[i];
    s.window.CopyFrom(o.window);
    if (s.compress_rate == 0) continue;
    s.comp_rows.CopyFrom(o.comp_rows);
    s.comp_entries.CopyFrom(o.comp_entries);
    if (s.has_index) {
      s.index_rows.CopyFrom(o.index_rows);
      s.index_entries.CopyFrom(o.index_entries);
    }
  }
  length_ = other.length_;
  mtp_length_ = other.mtp_length_;
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& s : layers_) {
    n += s.window.bytes();
    if (s.compress_rate == 0) continue;
    n += s.comp_rows.bytes() + s.comp_entries.bytes();
    if (s.has_index) n += s.index_rows.bytes() + s.index_entries.bytes();
  }
  return n;
}

}  // namespace dsinfer::model::deepseek_v4
