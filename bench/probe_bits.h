// Host helpers shared by the tensor-core bit probes (probe_wgmma_bits.cu, probe_fp8_mma_bits.cu):
// exact decodes of f16 / bf16 / e4m3 / e2m1, exact f16 / bf16 encodings, float
// bits and ulp distance, random e4m3 codes, a CUDA error check.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/quant_codec.h"
#include "backend/wgmma_fp8.h"
#include "base/dtype.h"

#define PROBE_CUDA_CHECK(expr)                                                      \
  do {                                                                              \
    cudaError_t probe_err_ = (expr);                                                \
    if (probe_err_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "%s:%d: CUDA error %s: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(probe_err_));                                 \
      std::exit(2);                                                                 \
    }                                                                               \
  } while (0)

namespace probe {

using dsinfer::BitsToFloat;
using dsinfer::FloatToBits;
using dsinfer::backend::fp8mma::WgmmaFp8Model;

// Exact decodes of the narrow formats: e4m3 through the codec the model's kernels share
// (backend/quant_codec.h; 0x7f / 0xff are NaN); e2m1 keeping the sign of a negative zero (the
// probe draws its e4m3 code).
inline double DecodeE4m3(uint8_t b) { return dsinfer::backend::qc::E4m3ToFloat(b); }
inline double DecodeE2m1(uint8_t b) {
  static const double kV[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (b & 8) ? -kV[b & 7] : kV[b & 7];
}

inline double DecodeF16(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
inline double DecodeBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Exact encodings (aborts if v is not representable): f16 (normal or subnormal) and bf16.
inline uint16_t EncodeF16(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  uint32_t field, mant;
  double q;
  if (e - 1 >= -14) {
    field = static_cast<uint32_t>(e - 1 + 15);
    q = std::ldexp(a, -(e - 1)) * 1024.0 - 1024.0;
  } else {
    field = 0;
    q = std::ldexp(a, 24);
  }
  mant = static_cast<uint32_t>(q);
  if (field > 30 || q != static_cast<double>(mant) || mant >= 1024) {
    std::fprintf(stderr, "EncodeF16: %.17g is not an f16 value\n", v);
    std::exit(2);
  }
  return static_cast<uint16_t>(sign | (field << 10) | mant);
}
inline uint16_t EncodeBf16(double v) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (static_cast<double>(f) != v || (bits & 0xffffu) != 0) {
    std::fprintf(stderr, "EncodeBf16: %.17g is not a bf16 value\n", v);
    std::exit(2);
  }
  return static_cast<uint16_t>(bits >> 16);
}

// Distance in ulps: the bit patterns on a line ordered like the values (-0 and +0 adjacent).
inline int64_t UlpDistance(float x, float y) {
  auto ordered = [](float f) {
    const uint32_t b = FloatToBits(f);
    return (b & 0x80000000u) ? -static_cast<int64_t>(b & 0x7fffffffu) - 1 : static_cast<int64_t>(b);
  };
  const int64_t d = ordered(x) - ordered(y);
  return d < 0 ? -d : d;
}

// Device copies of host vectors and back (the probes' buffers; freed with cudaFree).
template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* d = nullptr;
  PROBE_CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
  PROBE_CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
inline float* DeviceFloats(size_t n) {
  float* d = nullptr;
  PROBE_CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
  return d;
}
// n floats from the device; frees d.
inline std::vector<float> FromDevice(float* d, size_t n) {
  std::vector<float> v(n);
  PROBE_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  PROBE_CUDA_CHECK(cudaFree(d));
  return v;
}

// got vs want element by element, by bits or (against an exact reference, which has no sign of
// zero to match) by value: the elements, how many differ and by at most how many ulps; each of
// the first `show` mismatches' indices goes to on_mismatch (the probe prints its own example).
struct Tally {
  int64_t elements = 0, mismatches = 0, max_ulp = 0;
};
template <typename F>
Tally TallyMismatches(const std::vector<float>& got, const std::vector<float>& want, bool by_value,
                      int show, F&& on_mismatch) {
  Tally tl;
  for (size_t i = 0; i < got.size(); ++i) {
    ++tl.elements;
    const bool same = by_value ? got[i] == want[i] : FloatToBits(got[i]) == FloatToBits(want[i]);
    if (same) continue;
    if (tl.mismatches++ < show) on_mismatch(i);
    tl.max_ulp = std::max(tl.max_ulp, UlpDistance(got[i], want[i]));
  }
  return tl;
}

// A random e4m3 code, NaN excluded.
inline uint8_t RandomE4m3Bits(std::mt19937& rng) {
  for (;;) {
    const uint8_t b = static_cast<uint8_t>(rng() & 0xffu);
    if ((b & 0x7f) != 0x7f) return b;  // 0x7f / 0xff: NaN
  }
}

// The probes' command line ([--problems N], default 2000) and device (sm_90): true to go on;
// false after printing why (exit 2).
// Device 0's properties, if it is an sm_90 device; else false, having said why.
inline bool Sm90Device(const char* name, cudaDeviceProp* prop) {
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::fprintf(stderr, "%s: no CUDA device\n", name);
    return false;
  }
  PROBE_CUDA_CHECK(cudaGetDeviceProperties(prop, 0));
  if (prop->major != 9) {
    std::fprintf(stderr, "%s: needs sm_90, device is sm_%d%d\n", name, prop->major, prop->minor);
    return false;
  }
  return true;
}

inline bool ProbeSetup(int argc, char** argv, const char* name, int* count, cudaDeviceProp* prop) {
  *count = 2000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--problems") == 0 && i + 1 < argc) {
      *count = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--problems N]\n", name);
      return false;
    }
  }
  return Sm90Device(name, prop);
}

// The FP8 experiments' start (bench_fp8_gemm, bench_fp8_gemv): the host check's JSON line, then,
// unless only that was asked or it failed, an sm_90 device. -1: go on; else the exit code.
inline int StartAfterHostCheck(const char* name, bool host_ok, bool host_only,
                               cudaDeviceProp* prop) {
  std::printf("{\"bench\": \"%s_host_check\", \"ok\": %s}\n", name, host_ok ? "true" : "false");
  if (host_only || !host_ok) return host_ok ? 0 : 1;
  return Sm90Device(name, prop) ? -1 : 2;
}

}  // namespace probe
