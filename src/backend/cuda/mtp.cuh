// The MTP layer's input streams (spec §2.11): row i of an MTP forward pairs the main model's
// pre-head streams [hc, D] of position pos[i] with token ids[i]. Those streams are a row of this
// forward's source (the main step's X, or an earlier MTP forward's output when drafts chain), or,
// for the first row of a sequence, the row its last step kept in the sequence's streams ring.
//   LaunchMtpGatherStreams: out[i] = src[i] >= 0 ? x[src[i]] : ring(slot[i], pos[i]).
//   LaunchAddToStreams:     x[t, j, :] += add[t, :] for every stream j < hc.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"

namespace dsinfer::backend::cuda {

struct MtpGatherParams {
  TokenMeta meta;                // the MTP rows (slot, pos)
  const int32_t* src = nullptr;  // [n]: a row of x, or -1 for the ring's row at pos
  const float* x = nullptr;      // [*, ring.width] (may be null when no src is >= 0)
  RingRef ring;                  // ring.width floats per row
  float* out = nullptr;          // [n, ring.width]
};
void LaunchMtpGatherStreams(const MtpGatherParams& p, StreamHandle stream);

void LaunchAddToStreams(float* x, const float* add, int64_t n, int hc, int64_t D,
                        StreamHandle stream);

}  // namespace dsinfer::backend::cuda
