#include "model/paged_state.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"

namespace dsinfer::model {

HeapStatePages::HeapStatePages(const StateLayout& layout, int64_t growing_rows_per_page) {
  for (const auto& comp : layout.components()) {
    const int64_t rows = comp.ring() ? comp.ring_rows : growing_rows_per_page;
    rows_per_page_.push_back(rows);
    page_floats_.push_back(rows * comp.floats_per_row());
  }
  pages_.resize(layout.components().size());
}

float* HeapStatePages::Page(int component, int64_t index) {
  auto& pages = pages_[component];
  while (static_cast<int64_t>(pages.size()) <= index) {
    pages.push_back(std::make_unique<float[]>(static_cast<size_t>(page_floats_[component])));
  }
  return pages[index].get();
}

const float* PositionRing::Row(int64_t pos) const {
  DSINFER_CHECK(pos >= oldest_ && pos < end_);
  return rows_.Row(pos % capacity_);
}

void PositionRing::Append(const float* row) {
  std::memcpy(rows_.Row(end_ % capacity_), row, width() * sizeof(float));
  ++end_;
  oldest_ = std::max(oldest_, end_ - capacity_);
}

void PositionRing::Truncate(int64_t new_end) {
  DSINFER_CHECK(new_end >= oldest_ && new_end <= end_);
  end_ = new_end;
}

void PositionRing::Restart(int64_t pos) {
  DSINFER_CHECK(pos >= end_);
  end_ = oldest_ = pos;
}

void PositionRing::CopyFrom(const PositionRing& other) {
  DSINFER_CHECK(other.capacity_ == capacity_ && other.width() == width());
  for (int64_t slot = 0; slot < capacity_; ++slot) {
    std::memcpy(rows_.Row(slot), other.rows_.Row(slot), width() * sizeof(float));
  }
  end_ = other.end_;
  oldest_ = other.oldest_;
}

void EntryList::Append(const float* row) {
  std::memcpy(rows_.Row(count_), row, width() * sizeof(float));
  ++count_;
}

void EntryList::CopyFrom(const EntryList& other) {
  DSINFER_CHECK(other.width() == width());
  for (int64_t i = 0; i < other.count_; ++i) {
    float* to = rows_.Row(i);
    const float* from = other.rows_.Row(i);
    if (to != from) std::memcpy(to, from, width() * sizeof(float));  // a shared page's row is both
  }
  count_ = other.count_;
}

void LayerStreams::Bind(StateStream stream, PagedRows rows, int64_t ring_rows) {
  switch (stream) {
    case StateStream::kWindow:
      window = PositionRing(rows, ring_rows);
      break;
    case StateStream::kCompressorRows:
      comp_rows = PositionRing(rows, ring_rows);
      break;
    case StateStream::kIndexRows:
      index_rows = PositionRing(rows, ring_rows);
      break;
    case StateStream::kCompressed:
      comp_entries = EntryList(rows);
      break;
    case StateStream::kIndexKeys:
      index_entries = EntryList(rows);
      break;
    case StateStream::kMtpStreams:
      DSINFER_CHECK(false);  // the CUDA model's alone
      break;
  }
}

void LayerStreams::Truncate(int64_t length, int rate) {
  for (PositionRing* ring : {&window, &comp_rows, &index_rows}) {
    if (ring->end() > length) ring->Truncate(length);
  }
  const int64_t entries = rate > 0 ? length / rate : 0;
  for (EntryList* list : {&comp_entries, &index_entries}) {
    list->Truncate(std::min(list->count(), entries));
  }
}

void LayerStreams::CopyFrom(const LayerStreams& other) {
  window.CopyFrom(other.window);
  comp_rows.CopyFrom(other.comp_rows);
  index_rows.CopyFrom(other.index_rows);
  comp_entries.CopyFrom(other.comp_entries);
  index_entries.CopyFrom(other.index_entries);
}

size_t LayerStreams::bytes() const {
  return window.bytes() + comp_rows.bytes() + index_rows.bytes() + comp_entries.bytes() +
         index_entries.bytes();
}

Status CheckRollback(int64_t length, int64_t new_length, int rollback_slack) {
  if (new_length < 0 || new_length > length) {
    return InvalidArgument("rollback to " + std::to_string(new_length) + " of a sequence of " +
                           std::to_string(length));
  }
  if (length - new_length > rollback_slack) {
    return OutOfRange("rollback of " + std::to_string(length - new_length) +
                      " tokens exceeds the slack of " + std::to_string(rollback_slack));
  }
  return Status::Ok();
}

void StateLayoutBuilder::Add(StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer,
                             int stream, int64_t width) {
  StateComponent& comp = groups_[{kind, ring_rows, tokens_per_row}];
  const int64_t offset = comp.floats_per_row();
  comp.members.push_back({layer, stream, width, offset});
  comp.bytes_per_row += width * static_cast<int64_t>(sizeof(float));
}

StateLayout StateLayoutBuilder::Build() const {
  std::vector<StateComponent> components;
  for (const auto& [key, group] : groups_) {
    const auto& [kind, ring_rows, tokens_per_row] = key;
    StateComponent comp = group;
    comp.kind = kind;
    comp.ring_rows = ring_rows;
    comp.tokens_per_row = tokens_per_row;
    comp.name = std::string(cache::StateKindName(kind)) +
                (ring_rows > 0 ? "/ring" + std::to_string(ring_rows)
                               : "/rate" + std::to_string(tokens_per_row));
    components.push_back(std::move(comp));
  }
  return StateLayout(std::move(components));
}

}  // namespace dsinfer::model
