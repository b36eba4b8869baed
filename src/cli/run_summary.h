// RunSummary: the figures of an offline generation run — requests, tokens, throughput and the
// TTFT / TPOT percentiles — as text for a terminal and as a JSON line for benchmarks. TTFT counts
// from submission, so in an offline batch it includes queueing. Value type; not thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsinfer/engine.h"

namespace dsinfer::cli {

class RunSummary {
 public:
  void Add(const RequestResult& result);
  void set_wall_seconds(double s) { wall_s_ = s; }
  void set_engine_stats(const EngineStats& s) { stats_ = s; }
  void set_speculative(const SpeculativeOptions& s) { spec_ = s; }

  nlohmann::json ToJson() const;
  std::string ToText() const;

 private:
  int64_t requests_ = 0, failed_ = 0, prompt_tokens_ = 0, output_tokens_ = 0;
  std::vector<double> ttft_s_, tpot_s_;
  double wall_s_ = 0;
  EngineStats stats_;
  SpeculativeOptions spec_;
};

// The p-th percentile (0..100) by linear interpolation; 0 for no values.
double Percentile(std::vector<double> values, double p);

}  // namespace dsinfer::cli
