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
    layers_[i].has_index = layers_[i].compress_rate != 0 && layers_[i].compress_rate == c.csa_rate;
  }
  BindLayerStreams(layout, pages, &layers_);
}

Status SequenceState::Rollback(int64_t new_length) {
  DSINFER_RETURN_IF_ERROR(CheckRollback(length_, new_length, rollback_slack_));
  const int64_t new_mtp = std::min(mtp_length_, new_length);
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].Truncate(i + 1 == layers_.size() ? new_mtp : new_length, layers_[i].compress_rate);
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
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i].CopyFrom(other.layers_[i]);
  length_ = other.length_;
  mtp_length_ = other.mtp_length_;
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const auto& s : layers_) n += s.bytes();
  return n;
}

}  // namespace dsinfer::model::deepseek_v4
