// NumPy .npy files (version 1.0, little-endian float32 / int64, C order): the logits output format of
// `dsinfer logits` and the golden-data format of tests/data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsinfer::io {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // float32 arrays only
};

Status WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
StatusOr<NpyArray> ReadNpyF32(const std::string& path);

}  // namespace dsinfer::io
