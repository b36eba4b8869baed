// CSA / HCA compressors (spec §2.6, §2.8) and the per-position rings they read.
//   LaunchAddApe:        proj[t, width + c] += ape[pos_t % rate, c]  (gate half of each row)
//   LaunchCompressEmit:  for every row t whose position closes a window ((pos+1) % rate == 0),
//                        pool the window's rows per channel (softmax of the gate scores), RMSNorm,
//                        RoPE at the window's first position, and store entry pos/rate.
//   LaunchRingAppend:    copy this call's rows into a position ring (only the newest `cap` rows of
//                        each request are written, so rows never collide).
// Rows of positions inside this call come from `proj`; older ones from the ring.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "base/status.h"

namespace dsinfer::backend::cuda {

void LaunchAddApe(float* proj, int64_t n, int64_t width, const float* ape, int rate,
                  const int32_t* pos, StreamHandle stream);

struct CompressEmitParams {
  TokenMeta meta;
  const float* proj = nullptr;  // [n, 2 * width]: [kv (width) | gate + ape (width)] of this call
  RingRef rows;                 // the same rows of earlier positions (width 2 * width)
  ListRef entries;              // out: entry w of the slot (width dim)
  int rate = 0;
  int dim = 0;                  // entry width
  bool overlap = false;         // CSA: width = 2 * dim, previous window's Ca half + current Cb half
  const float* norm = nullptr;  // [dim]
  float eps = 1e-6f;
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2] (compress table)
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchCompressEmit(const CompressEmitParams& p, StreamHandle stream);

struct RingAppendParams {
  TokenMeta meta;
  const float* src = nullptr;  // [n, ld] rows of this call
  int64_t ld = 0;
  RingRef ring;                // ring.width floats copied per row
};
void LaunchRingAppend(const RingAppendParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda
