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

// Per-request state lives in paged pools (the engine's state cache plans the pages; the model's
// own slots use an identity table). A pool is pages of `page_floats` floats; each member (one
// layer's rows of a component) holds rows of `width` floats at `member_offset` within every page.
// The step's page table `pages` [sequences, pages_stride] int32 lists each sequence's pages in
// order; its row is the TokenMeta::slot of the sequence's token rows. 16-byte aligned throughout.

// A ring of `cap` rows, one page per sequence: row(slot, pos) = page + (pos % cap) * width.
struct RingRef {
  float* pool = nullptr;
  int64_t cap = 0;
  int64_t width = 0;
  int64_t page_floats = 0;
  int64_t member_offset = 0;
  const int32_t* pages = nullptr;
  int64_t pages_stride = 0;
#ifdef __CUDACC__
  // The sequence's ring (its row 0); kernels that read many rows of one sequence take it once.
  __device__ __forceinline__ float* Base(int slot) const {
    return pool + static_cast<int64_t>(pages[slot * pages_stride]) * page_floats + member_offset;
  }
  __device__ __forceinline__ float* Row(int slot, int64_t pos) const {
    return Base(slot) + (pos % cap) * width;
  }
#endif
};

// An append-only entry list, 2^rows_shift entries a page: entry(slot, w) is row w % 2^rows_shift of
// the sequence's page w / 2^rows_shift (a power of two: a shift and a mask, no division, in the
// attention's and indexer's inner loops).
struct ListRef {
  float* pool = nullptr;
  int64_t width = 0;
  int64_t page_floats = 0;
  int64_t member_offset = 0;
  int rows_shift = 0;
  const int32_t* pages = nullptr;
  int64_t pages_stride = 0;
  int64_t capacity = 0;  // entries a sequence can reach (the model's context / rate, + 1)
#ifdef __CUDACC__
  __device__ __forceinline__ float* Entry(int slot, int64_t w) const {
    return pool +
           static_cast<int64_t>(pages[slot * pages_stride + (w >> rows_shift)]) * page_floats +
           member_offset + (w & ((int64_t{1} << rows_shift) - 1)) * width;
  }
#endif
};

}  // namespace dsinfer::backend::cuda
