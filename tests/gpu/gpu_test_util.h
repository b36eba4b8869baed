// Helpers of the GPU op tests: skipping without a device, and host <-> device copies of vectors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

#define SKIP_WITHOUT_GPU() \
  if (!DeviceAvailable()) GTEST_SKIP() << "no CUDA device"

// A device copy of v (at least 16 bytes, so that an empty vector still has a valid pointer).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
  if (!v.empty()) CopyToDeviceSync(b.get(), v.data(), v.size() * sizeof(T));
  return b;
}

// The first `count` values of b, once the stream's work is done.
template <typename T>
std::vector<T> Download(const DeviceBuffer& b, size_t count, const Stream& s) {
  std::vector<T> v(count);
  s.Synchronize();
  if (count > 0) CopyToHost(v.data(), b.get(), count * sizeof(T), s.get());
  s.Synchronize();
  return v;
}

}  // namespace dsinfer::backend::cuda
