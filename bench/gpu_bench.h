// Shared pieces of the GPU benchmarks (bench_gemv, bench_qgemm, bench_attention, bench_indexer,
// bench_hc): device-random weights in the GPU layouts and random floats, uploads, the decode /
// prefill rows' metadata, RoPE frequencies, device time per launch (CUDA-graph replay or event
// timing), the device's copy bandwidth and the setup line, list-valued flags.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/linear.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "bench_flags.h"  // SplitList, ParseIntList

namespace dsinfer::bench {

// Bytes of an n x k weight's data and scales as the GPU stores them (FP8: TileFp8ForMma order and
// one scale per 128 x 128 block; FP4: two values a byte and one scale per 32 columns; bf16 / f32:
// no scales, 1 byte reserved).
struct WeightBytes {
  int64_t data = 0, scale = 0;
};
inline WeightBytes GpuWeightBytes(backend::cuda::WeightFormat f, int64_t n, int64_t k) {
  using backend::cuda::WeightFormat;
  switch (f) {
    case WeightFormat::kFp4:
      return {n * k / 2, n * (k / 32)};
    case WeightFormat::kFp8:
      return {backend::cuda::Fp8TiledBytes(n, k), ((n + 127) / 128) * ((k + 127) / 128)};
    case WeightFormat::kBf16:
      return {n * k * 2, 1};
    case WeightFormat::kF32:
      break;
  }
  return {n * k * 4, 1};
}

// Random values of an n x k weight into data / scale (GpuWeightBytes' sizes): random FP4 / FP8
// codes with every scale byte the same (so any layout of them reads alike), or bf16 / f32 values
// of standard deviation 0.02.
inline void FillRandomWeight(backend::cuda::WeightFormat f, int64_t n, int64_t k, uint32_t seed,
                             void* data, void* scale, backend::cuda::StreamHandle st) {
  namespace gpu = backend::cuda;
  const WeightBytes b = GpuWeightBytes(f, n, k);
  gpu::RandomFillParams d;
  d.data = data;
  d.seed = seed;
  switch (f) {
    case gpu::WeightFormat::kFp4:
      d.kind = gpu::RandomKind::kFp4;
      d.count = b.data;
      break;
    case gpu::WeightFormat::kFp8:
      d.kind = gpu::RandomKind::kFp8;
      d.count = b.data;
      break;
    case gpu::WeightFormat::kBf16:
      d.kind = gpu::RandomKind::kBf16Normal;
      d.count = n * k;
      d.std = 0.02f;
      break;
    case gpu::WeightFormat::kF32:
      d.kind = gpu::RandomKind::kF32Normal;
      d.count = n * k;
      d.std = 0.02f;
      break;
  }
  gpu::LaunchRandomFill(d, st);
  gpu::RandomFillParams s;
  s.data = scale;
  s.count = b.scale;
  s.kind = gpu::RandomKind::kByte;
  s.mean = f == gpu::WeightFormat::kFp4 ? gpu::Fp4GpuScaleByte(120) : 120;
  gpu::LaunchRandomFill(s, st);
}

// Device time per launch: `reps` calls of launch(rep) captured in one CUDA graph, replayed once
// to warm up, then the median of five timed replays divided by reps.
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

// count fp32 values ~ mean + std * N(0,1)-ish (at least one float of memory).
inline backend::cuda::DeviceBuffer RandomFloats(int64_t count, uint64_t seed,
                                                backend::cuda::StreamHandle st, float mean = 0.0f,
                                                float std = 1.0f) {
  namespace gpu = backend::cuda;
  gpu::DeviceBuffer b(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float));
  gpu::RandomFillParams f;
  f.data = b.get();
  f.count = count;
  f.kind = gpu::RandomKind::kF32Normal;
  f.mean = mean;
  f.std = std;
  f.seed = seed;
  gpu::LaunchRandomFill(f, st);
  return b;
}

// A device copy of v (at least one element of memory).
template <typename T>
backend::cuda::DeviceBuffer Upload(const std::vector<T>& v) {
  backend::cuda::DeviceBuffer b(std::max<size_t>(v.size(), 1) * sizeof(T));
  if (!v.empty()) backend::cuda::CopyToDeviceSync(b.get(), v.data(), v.size() * sizeof(T));
  return b;
}

// RoPE's inverse frequencies of rope_dim dims (base 10,000), as the benchmarks' configs use them.
inline std::vector<float> RopeInvFreq(int rope_dim) {
  std::vector<float> inv(static_cast<size_t>(rope_dim / 2));
  for (int j = 0; j < rope_dim / 2; ++j) inv[j] = std::pow(10000.0f, -2.0f * j / rope_dim);
  return inv;
}

// The rows of a launch: n query rows, one sequence each at position `last` (decode; slot i) or
// one sequence at positions 0 .. n - 1 (prefill; slot 0): their positions, and the TokenMeta
// whose device arrays are appended to *keep.
struct BenchRows {
  std::vector<int32_t> pos;
  backend::cuda::TokenMeta meta;
  BenchRows(int64_t n, bool prefill, int last, std::vector<backend::cuda::DeviceBuffer>* keep)
      : pos(static_cast<size_t>(n)) {
    std::vector<int32_t> ids(n, 5), slot(n), begin(n), start(n), count(n);
    for (int64_t i = 0; i < n; ++i) {
      pos[i] = prefill ? static_cast<int32_t>(i) : last;
      slot[i] = prefill ? 0 : static_cast<int32_t>(i);
      begin[i] = prefill ? 0 : static_cast<int32_t>(i);
      start[i] = pos[i] - (prefill ? static_cast<int32_t>(i) : 0);
      count[i] = prefill ? static_cast<int32_t>(n) : 1;
    }
    auto up = [&](const std::vector<int32_t>& v) {
      keep->push_back(Upload(v));
      return keep->back().as<const int32_t>();
    };
    meta.ids = up(ids);
    meta.pos = up(pos);
    meta.slot = up(slot);
    meta.seg_begin = up(begin);
    meta.seg_start = up(start);
    meta.seg_count = up(count);
    meta.n = n;
  }
};

// Device time of one call of launch(): the median of 7 event-timed calls after 2 warm-ups.
template <typename Fn>
double MedianEventUs(Fn&& launch, backend::cuda::StreamHandle st) {
  for (int i = 0; i < 2; ++i) launch();
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    backend::cuda::EventTimer timer;
    timer.Start(st);
    launch();
    t.push_back(timer.StopMs(st) * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device copy bandwidth in GB/s (bytes read + written): the median of 8 device-to-device copies
// of 1 GiB.
inline double CopyGBs(backend::cuda::StreamHandle st) {
  const size_t bytes = size_t{1} << 30;
  backend::cuda::DeviceBuffer a(bytes), b(bytes);
  std::vector<float> ms;
  for (int i = 0; i < 8; ++i) {
    backend::cuda::EventTimer t;
    t.Start(st);
    backend::cuda::CopyDeviceToDevice(b.get(), a.get(), bytes, st);
    ms.push_back(t.StopMs(st));
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

// The benchmarks' first line: the device and its copy bandwidth (returned, GB/s).
inline double PrintSetup(backend::cuda::StreamHandle st) {
  const double gbs = CopyGBs(st);
  std::printf("{\"bench\": \"setup\", \"device\": \"%s\", \"copy_GBps\": %.0f}\n",
              backend::cuda::DeviceDescription().c_str(), gbs);
  return gbs;
}

}  // namespace dsinfer::bench
