// The building blocks of a model family's per-request state in pages (cache/state_layout.h): rows
// of one layout member addressed through StatePages, a ring of rows by absolute position (window
// K=V, compressor inputs) and an append-only list (compressed entries, index keys), plus private
// heap pages for requests outside the engine (`dsinfer logits`, tests, benchmarks). A row is
// `width` floats of page memory; a family may store packed bytes in it (V4.1's FP8 / FP4 KV
// entries). Shared by every family's SequenceState; each object is owned by one request and is
// not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "cache/state_layout.h"
#include "cache/state_pages.h"

namespace dsinfer::model {

using cache::StateComponent;
using cache::StateKind;
using cache::StateLayout;
using cache::StateMember;
using cache::StatePages;

// Private pages on the heap.
class HeapStatePages : public StatePages {
 public:
  explicit HeapStatePages(const StateLayout& layout, int64_t growing_rows_per_page = 64);
  int64_t rows_per_page(int component) const override { return rows_per_page_[component]; }
  float* Page(int component, int64_t index) override;

 private:
  std::vector<int64_t> rows_per_page_;
  std::vector<int64_t> page_floats_;
  std::vector<std::vector<std::unique_ptr<float[]>>> pages_;
};

// Rows of one member of a component, addressed through its pages.
class PagedRows {
 public:
  PagedRows() = default;
  PagedRows(StatePages* pages, int component, int64_t offset, int64_t width)
      : pages_(pages),
        component_(component),
        offset_(offset),
        width_(width),
        rows_per_page_(pages->rows_per_page(component)) {}
  int64_t width() const { return width_; }
  float* Row(int64_t r) const {
    float* page = pages_->Page(component_, r / rows_per_page_);
    return page + offset_ * rows_per_page_ + (r % rows_per_page_) * width_;
  }

 private:
  StatePages* pages_ = nullptr;
  int component_ = 0;
  int64_t offset_ = 0;
  int64_t width_ = 0;
  int64_t rows_per_page_ = 1;
};

// Fixed-width rows addressed by absolute position, keeping the newest `capacity` of them.
class PositionRing {
 public:
  PositionRing() = default;
  PositionRing(PagedRows rows, int64_t capacity) : rows_(rows), capacity_(capacity) {}

  int64_t width() const { return rows_.width(); }
  int64_t capacity() const { return capacity_; }
  // Positions [oldest(), end()) are readable.
  int64_t end() const { return end_; }
  int64_t oldest() const { return oldest_; }
  const float* Row(int64_t pos) const;
  // Appends the row of position end().
  void Append(const float* row);
  // Forgets positions >= new_end; rows below it stay readable.
  void Truncate(int64_t new_end);
  // Empties the ring and moves it on to `pos` (>= end()): the next Append is position pos (the
  // positions skipped would have left the ring before the rows appended next are read).
  void Restart(int64_t pos);
  // Copies every slot and the positions of `other` (same geometry).
  void CopyFrom(const PositionRing& other);
  size_t bytes() const { return static_cast<size_t>(capacity_ * width()) * sizeof(float); }

 private:
  PagedRows rows_;
  int64_t capacity_ = 0;
  int64_t end_ = 0;
  int64_t oldest_ = 0;
};

// Append-only list of fixed-width entries.
class EntryList {
 public:
  EntryList() = default;
  explicit EntryList(PagedRows rows) : rows_(rows) {}

  int64_t width() const { return rows_.width(); }
  int64_t count() const { return count_; }
  const float* Row(int64_t i) const { return rows_.Row(i); }
  void Append(const float* row);
  void Truncate(int64_t n) { count_ = n; }
  // Copies the first count() rows of `other`; a row already in place (a page both share) stays.
  void CopyFrom(const EntryList& other);
  size_t bytes() const { return static_cast<size_t>(count_ * width()) * sizeof(float); }

 private:
  PagedRows rows_;
  int64_t count_ = 0;
};

// The per-layer state streams of the DeepSeek-V4 family (StateMember::stream): the window K=V
// ring, the compressor input ring(s) and the compressed-entry and index-key lists. A family binds
// those its layout gives a layer; the others stay empty (no rows, zero bytes). kMtpStreams: the
// main model's streams kept for the MTP layer, in the CUDA model's layout only (the CPU keeps them
// on the host).
enum class StateStream {
  kWindow,
  kCompressorRows,
  kIndexRows,
  kCompressed,
  kIndexKeys,
  kMtpStreams
};

struct LayerStreams {
  PositionRing window;      // [pos] -> K=V row
  PositionRing comp_rows;   // [pos] -> compressor input row
  PositionRing index_rows;  // [pos] -> the indexer compressor's input row (V4 CSA)
  EntryList comp_entries;   // [entry] -> compressed KV entry
  EntryList index_entries;  // [entry] -> index key

  // `stream` takes `rows` (a ring of ring_rows, or a list).
  void Bind(StateStream stream, PagedRows rows, int64_t ring_rows);
  // Back to the first `length` tokens, the lists to floor(length / rate) entries (rate 0: none).
  void Truncate(int64_t length, int rate);
  // A copy of `other`'s streams (the same geometry).
  void CopyFrom(const LayerStreams& other);
  size_t bytes() const;
};

// Calls bind(member, rows, ring_rows) for every member of `layout` (ring_rows: its component's,
// 0 for a growing list), its rows in `pages`: how a family's state finds its streams.
template <typename Bind>
void BindMembers(const StateLayout& layout, StatePages* pages, Bind&& bind) {
  const auto& comps = layout.components();
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    for (const StateMember& m : comps[ci].members) {
      bind(m, PagedRows(pages, static_cast<int>(ci), m.offset, m.width), comps[ci].ring_rows);
    }
  }
}

// Binds every member of `layout` to its layer's streams (Layer derives from LayerStreams).
template <typename Layer>
void BindLayerStreams(const StateLayout& layout, StatePages* pages, std::vector<Layer>* layers) {
  BindMembers(layout, pages, [&](const StateMember& m, PagedRows rows, int64_t ring_rows) {
    (*layers)[m.layer].Bind(static_cast<StateStream>(m.stream), rows, ring_rows);
  });
}

// Whether a state of `length` tokens may roll back to `new_length` with `rollback_slack`:
// InvalidArgument outside [0, length], OutOfRange beyond the slack.
Status CheckRollback(int64_t length, int64_t new_length, int rollback_slack);

// Groups (kind, ring rows, tokens per row) of members into the components of a StateLayout, in
// a fixed order (kind, then ring, then rate), each member's rows laid out as cache/ says. A family
// adds its members in layer order and takes the layout.
class StateLayoutBuilder {
 public:
  // `width`: floats per row of this member (packed rows round their bytes up to floats).
  void Add(StateKind kind, int64_t ring_rows, int64_t tokens_per_row, int layer, int stream,
           int64_t width);
  StateLayout Build() const;

 private:
  std::map<std::tuple<StateKind, int64_t, int64_t>, StateComponent> groups_;
};

}  // namespace dsinfer::model
