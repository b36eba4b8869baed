#include "model/deepseek_v41/state.h"

#include <cstring>

#include "base/check.h"

namespace dsinfer::model::deepseek_v41 {

SequenceState::SequenceState(const io::DeepseekV41Config& config, int rollback_slack, bool dspark)
    : rollback_slack_(rollback_slack) {
  const cache::StateLayout layout = DeepseekV41StateLayout(config, rollback_slack, dspark);
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
  BindMembers(layout, pages, [&](const StateMember& m, PagedRows rows, int64_t ring_rows) {
    if (m.stream == kTokenStream) {
      tokens_ = PositionRing(rows, ring_rows);
    } else if (m.stream == kDraftStream) {
      if (draft_.size() <= static_cast<size_t>(m.layer)) draft_.resize(m.layer + 1);
      draft_[m.layer] = PositionRing(rows, ring_rows);
    } else {
      layers_[m.layer].Bind(static_cast<StateStream>(m.stream), rows, ring_rows);
    }
  });
}

int32_t SequenceState::TokenAt(int64_t pos) const {
  int32_t id;
  std::memcpy(&id, tokens_.Row(pos), sizeof(id));
  return id;
}

void SequenceState::AppendToken(int32_t id) {
  float row;
  std::memcpy(&row, &id, sizeof(id));
  tokens_.Append(&row);
}

Status SequenceState::Rollback(int64_t new_length) {
  DSINFER_RETURN_IF_ERROR(CheckRollback(length_, new_length, rollback_slack_));
  for (LayerState& s : layers_) s.Truncate(new_length, s.source ? s.ratio : 0);
  if (tokens_.capacity() > 0) tokens_.Truncate(new_length);
  for (PositionRing& r : draft_) r.Truncate(new_length);
  length_ = new_length;
  return Status::Ok();
}

void SequenceState::CopyFrom(const SequenceState& other) {
  DSINFER_CHECK(other.layers_.size() == layers_.size() && other.rollback_slack_ == rollback_slack_);
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i].CopyFrom(other.layers_[i]);
  if (tokens_.capacity() > 0) tokens_.CopyFrom(other.tokens_);
  DSINFER_CHECK(other.draft_.size() == draft_.size());
  for (size_t s = 0; s < draft_.size(); ++s) draft_[s].CopyFrom(other.draft_[s]);
  length_ = other.length_;
}

size_t SequenceState::bytes() const {
  size_t n = 0;
  for (const LayerState& s : layers_) n += s.bytes();
  n += tokens_.bytes();
  for (const PositionRing& r : draft_) n += r.bytes();
  return n;
}

}  // namespace dsinfer::model::deepseek_v41
