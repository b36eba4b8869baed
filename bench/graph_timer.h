// Device time per launch for the GPU benchmarks (bench_gemv, bench_qgemm): `reps` calls of
// launch(rep) captured in one CUDA graph, replayed once to warm up, then the median of five timed
// replays divided by reps.
#pragma once

#include <algorithm>
#include <vector>

#include "backend/cuda/runtime.h"

namespace dsinfer::bench {

template <typename Fn>
double MedianGraphUs(Fn&& launch, int reps, backend::cuda::StreamHandle st) {
  backend::cuda::Graph g;
  g.BeginCapture(st);
  for (int r = 0; r < reps; ++r) launch(r);
  g.EndCapture(st);
  g.Launch(st);  // warm-up
  std::vector<double> t;
  for (int it = 0; it < 5; ++it) {
    backend::cuda::EventTimer timer;
    timer.Start(st);
    g.Launch(st);
    t.push_back(timer.StopMs(st) * 1e3 / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace dsinfer::bench
