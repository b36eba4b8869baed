#include "model/deepseek_v4/state.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace dsinfer::model::deepseek_v4 {

PositionRing::PositionRing(int64_t capacity, int64_t width)
    : capacity_(capacity), width_(width), data_(static_cast<size_t>(capacity * width)) {}

const float* PositionRing::Row(int64_t pos) const {
  DSINFER_CHECK(pos >= oldest_ && pos < end_);
  return data_.data() + (pos % capacity_) * width_;
}

void PositionRing::Append(const float* row) {
  std::memcpy(data_.data() + (end_ % capacity_) * width_, row, width_ * sizeof(float));
  ++end_;
  oldest_ = std::max(oldest_, end_ - capacity_);
}

void PositionRing::Truncate(int64_t new_end) {
  DSINFER_CHECK(new_end >= oldest_ && new_end <= end_);
  end_ = new_end;
}

SequenceState::SequenceState(const io::DeepseekV4Config& c, int rollback_slack)
    : rollback_slack_(rollback_slack) {
  layers_.resize(c.num_layers + 1);
  for (int i = 0; i <= c.num_layers; ++i) {
    LayerState& s = layers_[i];
    s.compress_rate = i < c.num_layers ? c.compress_ratios[i] : c.mtp_compress_ratio;
    s.window = PositionRing(c.sliding_window - 1 + rollback_slack, c.head_dim);
    if (s.compress_rate == 0) continue;
    const bool csa = s.compress_rate == c.csa_rate;
    const int64_t rate = s.compress_rate;
    // CSA entries read the previous window's Ca half: 2 windows of rows; HCA: one window.
    const int64_t rows = (csa ? 2 * rate : rate) + rollback_slack;
    const int64_t width = csa ? 2 * c.head_dim : c.head_dim;
    s.comp_rows = PositionRing(rows, 2 * width);
    s.comp_entries.width = c.head_dim;
    if (csa) {
      s.index_rows = PositionRing(rows, 2 * 2 * c.index_head_dim);
      s.index_entries.width = c.index_head_dim;
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
    if (s.index_entries.width) {
      if (s.index_rows.end() > n) s.index_rows.Truncate(n);
      s.index_entries.Truncate(std::min(s.index_entries.count(), n / s.compress_rate));
    }
  }
  length_ = new_length;
  mtp_length_ = new_mtp;
  return Status::Ok();
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& s : layers_) {
    n += s.window.bytes() + s.comp_rows.bytes() + s.index_rows.bytes();
    n += (s.comp_entries.data.size() + s.index_entries.data.size()) * sizeof(float);
  }
  return n;
}

}  // namespace dsinfer::model::deepseek_v4
