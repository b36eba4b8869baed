// Fixtures of the DeepSeek-V4.1 device op tests (gpu_v41_ops_test.cc, gpu_v41_indexer_test.cc):
// one call's per-token metadata, the schedules a sequence's rows are cut into, the paged
// state pools (entry lists and rings), the RoPE frequencies.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "base/dtype.h"
#include "gpu_test_util.h"

namespace dsinfer::backend::cuda::v41_test {

inline bool SameBits(float a, float b) { return FloatToBits(a) == FloatToBits(b); }

// ---- per-token metadata of one call ----

struct Seg {
  int slot, start, count;
};

struct Meta {
  std::vector<int32_t> ids, pos, slot, seg_begin, seg_start, seg_count;
  DeviceBuffer d_ids, d_pos, d_slot, d_begin, d_start, d_count;
  TokenMeta meta;
  int64_t n() const { return static_cast<int64_t>(pos.size()); }
};

// Rows of the segments in order; ids from tokens[slot][pos] (when given).
inline std::unique_ptr<Meta> MakeMeta(const std::vector<Seg>& segs,
                                      const std::vector<std::vector<int32_t>>* tokens = nullptr) {
  auto m = std::make_unique<Meta>();
  for (const Seg& s : segs) {
    const int begin = static_cast<int>(m->pos.size());
    for (int i = 0; i < s.count; ++i) {
      m->ids.push_back(tokens ? (*tokens)[s.slot][s.start + i] : 0);
      m->pos.push_back(s.start + i);
      m->slot.push_back(s.slot);
      m->seg_begin.push_back(begin);
      m->seg_start.push_back(s.start);
      m->seg_count.push_back(s.count);
    }
  }
  m->d_ids = Upload(m->ids);
  m->d_pos = Upload(m->pos);
  m->d_slot = Upload(m->slot);
  m->d_begin = Upload(m->seg_begin);
  m->d_start = Upload(m->seg_start);
  m->d_count = Upload(m->seg_count);
  m->meta.ids = m->d_ids.as<int32_t>();
  m->meta.pos = m->d_pos.as<int32_t>();
  m->meta.slot = m->d_slot.as<int32_t>();
  m->meta.seg_begin = m->d_begin.as<int32_t>();
  m->meta.seg_start = m->d_start.as<int32_t>();
  m->meta.seg_count = m->d_count.as<int32_t>();
  m->meta.n = m->n();
  return m;
}

// Schedules over sequences of the given lengths: calls of several requests' chunks (the chunk
// length cycling through `chunks`), or one row per call (interleaving the sequences).
inline std::vector<std::vector<Seg>> ChunkedSchedule(const std::vector<int>& lengths,
                                                     const std::vector<int>& chunks) {
  std::vector<std::vector<Seg>> calls;
  std::vector<int> done(lengths.size(), 0);
  for (size_t c = 0;; ++c) {
    std::vector<Seg> call;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int take = std::min(chunks[(c + s) % chunks.size()], lengths[s] - done[s]);
      if (take <= 0) continue;
      call.push_back({static_cast<int>(s), done[s], take});
      done[s] += take;
    }
    if (call.empty()) return calls;
    calls.push_back(call);
  }
}

inline std::vector<std::vector<Seg>> RowSchedule(const std::vector<int>& lengths) {
  std::vector<std::vector<Seg>> calls;
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  for (int p = 0; p < longest; ++p) {
    for (size_t s = 0; s < lengths.size(); ++s) {
      if (p < lengths[s]) calls.push_back({{static_cast<int>(s), p, 1}});
    }
  }
  return calls;
}

// ---- paged state fixtures ----

// An entry list: 2^shift entries a page, the pages of a sequence scattered in reverse order, a
// member offset of 4 floats.
struct ListPool {
  int seqs, capacity, width, shift = 3, pps;
  int64_t page_floats;
  std::vector<int32_t> pages;
  DeviceBuffer pool, d_pages;
  ListRef ref;
  ListPool(int seqs_, int capacity_, int width_) : seqs(seqs_), capacity(capacity_), width(width_) {
    pps = (capacity + (1 << shift) - 1) >> shift;
    page_floats = (int64_t{1} << shift) * width + 4;
    const int total = seqs * pps;
    for (int i = 0; i < total; ++i) pages.push_back(total - 1 - i);
    pool = DeviceBuffer(static_cast<size_t>(total * page_floats) * sizeof(float));
    d_pages = Upload(pages);
    ref.pool = pool.as<float>();
    ref.width = width;
    ref.page_floats = page_floats;
    ref.member_offset = 4;
    ref.rows_shift = shift;
    ref.pages = d_pages.as<int32_t>();
    ref.pages_stride = pps;
    ref.capacity = capacity;
  }
  int64_t Offset(int slot, int w) const {
    return pages[slot * pps + (w >> shift)] * page_floats + 4 + (w & ((1 << shift) - 1)) * width;
  }
  void Fill(float v, const Stream& s) {
    std::vector<float> h(pool.bytes() / sizeof(float), v);
    CopyToDeviceSync(pool.get(), h.data(), pool.bytes());
    s.Synchronize();
  }
  std::vector<float> Host(const Stream& s) const {
    return Download<float>(pool, pool.bytes() / sizeof(float), s);
  }
  // Uploads entries[slot] ([capacity, width]) into the pool.
  void Set(const std::vector<std::vector<float>>& entries) {
    std::vector<float> h(pool.bytes() / sizeof(float), 0.0f);
    for (int s = 0; s < seqs; ++s) {
      for (int w = 0; w < capacity; ++w) {
        std::copy_n(entries[s].data() + static_cast<int64_t>(w) * width, width,
                    h.data() + Offset(s, w));
      }
    }
    CopyToDeviceSync(pool.get(), h.data(), pool.bytes());
  }
};

// A ring of `cap` rows a sequence, one page each.
struct RingPool {
  std::vector<int32_t> pages;
  DeviceBuffer pool, d_pages;
  RingRef ref;
  RingPool(int seqs, int cap, int width) {
    for (int i = 0; i < seqs; ++i) pages.push_back(i);
    pool = DeviceBuffer(static_cast<size_t>(seqs) * cap * width * sizeof(float));
    d_pages = Upload(pages);
    ref.pool = pool.as<float>();
    ref.cap = cap;
    ref.width = width;
    ref.page_floats = int64_t{cap} * width;
    ref.member_offset = 0;
    ref.pages = d_pages.as<int32_t>();
    ref.pages_stride = 1;
  }
};

inline std::vector<float> InvFreq(int rope_dim) {
  std::vector<float> f(static_cast<size_t>(rope_dim / 2));
  for (int j = 0; j < rope_dim / 2; ++j) {
    f[j] = static_cast<float>(std::pow(10000.0, -2.0 * j / rope_dim));
  }
  return f;
}

}  // namespace dsinfer::backend::cuda::v41_test
