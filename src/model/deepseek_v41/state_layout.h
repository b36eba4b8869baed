// The DeepSeek-V4.1 state layout, filled into the cache's model-agnostic spec
// (cache/state_layout.h). KV sharing makes it lopsided: only a group's KV source owns compressed
// state, so the other layers of the group (Reuse, and Reindex, which scores the source's index keys
// with its own queries and keeps nothing between calls) own only their window:
//   window      every layer: a ring of W-1+slack K=V rows, FP8 (e4m3 + a power-of-two scale per
//               32 channels)                                                   (fixed per request)
//   compressor  ratio-r sources, r > 1: a ring of r+slack rows [x·wkvᵀ | x·wgateᵀ] fp32, the open
//               group's inputs                                                 (fixed per request)
//   compressed  every source: floor(length/r) KV entries, FP4 (e2m1 + an e4m3 scale per 16
//               channels: 288 bytes at head_dim 512)                                      (grows)
//   index_keys  every source: floor(length/r) index keys, FP4 (e2m1 + a power-of-two scale per
//               32 channels)                                                              (grows)
//   tokens      Engram configs: a ring of N-1+slack token ids (N = engram_max_ngram_size), the
//               n-gram look-back of the next chunk's first rows (one int32 per row) (fixed)
//   dspark      with the DSpark drafter: per draft stage a ring of W+slack context K=V rows, FP8 as
//               the window (the stage's projection of the target layers' taps at each position)
//                                                                              (fixed per request)
// Rows whose length is not a multiple of the quantizer's block stay fp32 (the fake-quantizer
// leaves them alone). ExactBytes(n) equals SequenceState::bytes() after n tokens.
#pragma once

#include "cache/state_layout.h"
#include "io/deepseek_v41_config.h"
#include "model/paged_state.h"
#include "model/quant_sim.h"

namespace dsinfer::model::deepseek_v41 {

// Which per-layer stream of SequenceState a member is (cache::StateMember::stream; V4.1 has no
// indexer compressor rows).
using model::StateStream;
// The stream number of the Engram token ring (a member of layer 0; not a per-layer stream).
inline constexpr int kTokenStream = 100;
// The stream number of a DSpark stage's context ring (member layer = the stage).
inline constexpr int kDraftStream = 101;

// The storage of the three kinds of cache rows.
KvFormat WindowFormat(const io::DeepseekV41Config& config);
KvFormat EntryFormat(const io::DeepseekV41Config& config);
KvFormat IndexKeyFormat(const io::DeepseekV41Config& config);

// `dspark`: with the DSpark drafter's context rings (the config must have draft layers).
cache::StateLayout DeepseekV41StateLayout(const io::DeepseekV41Config& config, int rollback_slack,
                                          bool dspark = false);

}  // namespace dsinfer::model::deepseek_v41
