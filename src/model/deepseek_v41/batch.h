// TokenBatch: the tokens of one forward call of DeepSeek-V4.1, from one or more requests, grouped
// by request into contiguous segments. Dense ops run over all rows; attention, the compressor and
// the indexer run per segment against that request's SequenceState. `GroupShared` is the per-
// forward, per-segment state the reference passes between layers in its `shared` dict: the top-k
// picks of the last index source and the candidate-block mask of the candidate source, per token
// (and the current group's index keys, unpacked once).
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v41/state.h"

namespace dsinfer::model::deepseek_v41 {

struct GroupShared {
  int keys_source = -1;     // the KV source whose index keys `keys` holds (-1: none yet)
  std::vector<float> keys;  // [entries, index_head_dim] that source's index keys, unpacked
  bool has_topk = false;
  std::vector<std::vector<int32_t>> topk;  // [count][picked entries, ascending]
  bool has_candidates = false;
  std::vector<std::vector<uint8_t>> candidates;  // [count][blocks]: 1 = candidate block
};

struct BatchSegment {
  SequenceState* state = nullptr;
  int64_t begin = 0;      // first row in the batch
  int64_t count = 0;      // rows
  int64_t start_pos = 0;  // absolute position of the first row
  GroupShared shared;
};

struct TokenBatch {
  std::vector<int32_t> ids;        // [N]
  std::vector<int64_t> positions;  // [N]
  std::vector<BatchSegment> segments;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

}  // namespace dsinfer::model::deepseek_v41
