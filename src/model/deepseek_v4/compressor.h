// KV compressors (spec §2.6 CSA with overlapping windows, §2.8 HCA) and the index-key compressor of
// the Lightning Indexer (§2.7, same math at index_head_dim). Entry w of rate m is emitted when the
// token at position (w+1)*m - 1 has been processed, so chunking never changes what is emitted.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

// `proj`: [count, 2 * width] rows of the segment's new tokens = [x·wkvᵀ | x·wgateᵀ + ape[pos % m]].
// Emits every entry closed by positions [start_pos, start_pos + count) into `entries` (RMSNorm,
// RoPE at position w*m with `inv_freq`; `hadamard`: then HadamardRotate, the FP8 cache's index
// keys), stored as `format` packs them (which also applies its rounding), then appends the rows
// to `rows`.
void CompressSegment(const CompressorWeights& w, const float* proj, int64_t start_pos,
                     int64_t count, const std::vector<float>& inv_freq, int rope_dim,
                     float norm_eps, const KvFormat& format, bool hadamard, PositionRing* rows,
                     EntryList* entries);

// Adds ape[pos % rate] to the gate half of projected rows [n, 2*width] at the given positions.
void AddPositionBias(const CompressorWeights& w, const int64_t* positions, int64_t n, float* proj);

}  // namespace dsinfer::model::deepseek_v4
