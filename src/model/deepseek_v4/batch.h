// TokenBatch: the tokens of one forward call, from one or more requests. Rows are grouped by
// request into contiguous segments; every dense op runs over all rows at once, attention and the
// compressors run per segment against that request's SequenceState.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/state.h"

namespace dsinfer::model::deepseek_v4 {

struct BatchSegment {
  SequenceState* state = nullptr;
  int64_t begin = 0;      // first row in the batch
  int64_t count = 0;      // rows
  int64_t start_pos = 0;  // absolute position of the first row
};

struct TokenBatch {
  std::vector<int32_t> ids;        // [N]
  std::vector<int64_t> positions;  // [N]
  std::vector<BatchSegment> segments;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

}  // namespace dsinfer::model::deepseek_v4
