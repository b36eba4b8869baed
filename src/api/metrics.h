// ServerMetrics: the server's Prometheus metrics (text exposition format 0.0.4, every name
// prefixed dsinfer_): requests by endpoint and status, prompt / generation tokens, TTFT / TPOT /
// end-to-end latency histograms, plus the engine's gauges (running, waiting, state memory,
// preemptions) read at scrape time. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "dsinfer/engine.h"

namespace dsinfer::api {

class ServerMetrics {
 public:
  // One finished HTTP request: its endpoint (e.g. "/v1/chat/completions") and status code.
  void CountRequest(const std::string& endpoint, int status);
  // One finished completion of a generation request.
  void CountCompletion(int64_t prompt_tokens, int64_t completion_tokens, double ttft_s,
                       double e2e_s);
  // Client disconnects that aborted a request.
  void CountAbort();

  // The exposition text; `engine` is null while the model loads.
  std::string Render(const EngineStats* engine, int64_t open_requests) const;

 private:
  struct Histogram {
    static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                       1,     2.5,  5,     10,   30,  60,   120};
    std::array<int64_t, kBounds.size()> counts{};
    int64_t count = 0;
    double sum = 0;
    void Observe(double x);
    void Render(const std::string& name, const std::string& help, std::string* out) const;
  };

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t aborts_ = 0;
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace dsinfer::api
