// List-valued flags of the benchmarks (host only: the CPU benches include it as the GPU ones do,
// through gpu_bench.h).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace dsinfer::bench {

// The items of a comma-separated flag value ("1,32,256"), in order.
inline std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
  return v;
}
inline std::vector<int64_t> ParseIntList(const std::string& s) {
  std::vector<int64_t> v;
  for (const std::string& x : SplitList(s)) v.push_back(std::atoll(x.c_str()));
  return v;
}

}  // namespace dsinfer::bench
