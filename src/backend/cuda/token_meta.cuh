// Per-token metadata of one forward call and the device views of per-request state, shared by the
// attention, compressor and indexer kernels. All arrays live on the device so that a decode step
// can be captured once and replayed (the host only rewrites their contents).
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// [n] int32 arrays, one entry per token row of the batch. Rows of one request are contiguous.
struct TokenMeta {
  const int32_t* ids = nullptr;
  const int32_t* pos = nullptr;        // absolute position of the row
  const int32_t* slot = nullptr;       // state slot of the row's request
  const int32_t* seg_begin = nullptr;  // batch row of the request's first row in this call
  const int32_t* seg_start = nullptr;  // absolute position of that first row
  const int32_t* seg_count = nullptr;  // rows of the request in this call
  int64_t n = 0;
};

// Fixed-width rows addressed by absolute position in a ring of `cap` rows per slot:
// row(slot, pos) = data + slot * slot_stride + (pos % cap) * width. fp32.
struct RingRef {
  float* data = nullptr;
  int64_t cap = 0;
  int64_t width = 0;
  int64_t slot_stride = 0;
};

// Append-only entry lists: entry(slot, w) = data + slot * slot_stride + w * width. fp32.
struct ListRef {
  float* data = nullptr;
  int64_t width = 0;
  int64_t slot_stride = 0;
  int64_t capacity = 0;  // entries per slot
};

}  // namespace dsinfer::backend::cuda
