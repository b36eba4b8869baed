// The DeepSeek-V4 state layout (spec §3.1-3.2), filled into the cache's model-agnostic spec
// (cache/state_layout.h):
//   window       every layer + MTP: a ring of W-1+slack K=V rows               (fixed per request)
//   compressor   CSA main + indexer rows (2*rate+slack), HCA rows (rate+slack)  (fixed per request)
//   compressed   CSA/HCA compressed KV entries: floor(length/rate) rows         (grows)
//   index_keys   CSA indexer keys: floor(length/rate) rows                      (grows)
// K=V rows (window, compressed) and index keys are stored as WindowFormat / IndexKeyFormat say:
// fp32 with KvCacheDtype::kFloat32, packed (fp8_ds_mla, e2m1 + ue8m0) with kFp8.
// ExactBytes(n) equals SequenceState::bytes() after n tokens.
#pragma once

#include "cache/state_layout.h"
#include "cache/state_pages.h"
#include "io/model_config.h"
#include "model/paged_state.h"
#include "model/quant_sim.h"

namespace dsinfer::model::deepseek_v4 {

using cache::StateComponent;
using cache::StateKind;
using cache::StateKindName;
using cache::StateLayout;
using cache::StateMember;
using cache::StatePages;

// Which per-layer stream of SequenceState a member is (StateMember::stream).
using model::StateStream;

// How a K=V row (window ring, compressed entries) and an index key are stored: unquantized fp32
// (KvQuant::kNone) with KvCacheDtype::kFloat32; with kFp8 kFp8BfTail (nope dims block 64, RoPE
// dims bf16) and kFp4Pow2 (block 32), whose Pack also applies the official rounding.
KvFormat WindowFormat(const io::DeepseekV4Config& config);
KvFormat IndexKeyFormat(const io::DeepseekV4Config& config);

// Layers 0..num_layers-1, and num_layers for the MTP layer. mtp_stream_rows > 0 (the CUDA model
// with its MTP drafter): also a ring of that many rows of the main model's last streams [hc, D]
// per position (StateStream::kMtpStreams of the MTP layer), which the MTP layer pairs with the
// next token. The CPU and the CUDA model store the same row formats.
StateLayout DeepseekV4StateLayout(const io::DeepseekV4Config& config, int rollback_slack,
                                  int64_t mtp_stream_rows = 0);

}  // namespace dsinfer::model::deepseek_v4
