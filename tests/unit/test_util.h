// Helpers shared by the unit tests: scratch dirs and small files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace dsinfer::testing {

// A fresh directory under the build tree, removed first if it exists.
// Per process, since ctest runs each test case in its own process, several at a time.
inline std::string ScratchDir(const std::string& name) {
  auto dir = std::filesystem::path(DSINFER_BINARY_DIR) / "test_scratch" /
             (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|
inline double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    ref = std::max(ref, std::abs(double(b[i])));
  }
  return a.size() == b.size() ? diff / std::max(ref, 1e-30) : 1e30;
}

}  // namespace dsinfer::testing
