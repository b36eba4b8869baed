// The decode GEMV kernel template (see gemv.cuh); instantiated per weight format by
// gemv_<format>_sm90.cu so that the four formats compile in parallel.
#pragma once

#include "backend/cuda/check.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launch.cuh"

namespace dsinfer::backend::cuda::gemv {

constexpr int kWarps = 4;

template <WeightFormat F> struct Ch;
template <> struct Ch<WeightFormat::kF32> { static constexpr int v = 4; };
template <> struct Ch<WeightFormat::kBf16> { static constexpr int v = 8; };

// acc after the chunk's products, in LinearBody's order for the format.
template <WeightFormat F>
__device__ __forceinline__ float ChunkDot(const uint4& q, const float* xv, float acc) {
  const uint32_t u[4] = {q.x, q.y, q.z, q.w};
  if constexpr (F == WeightFormat::kF32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc = fmaf(__uint_as_float(u[i]), xv[i], acc);
  } else {
    static_assert(F == WeightFormat::kBf16, "the decode GEMV takes f32 and bf16 weights");
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(__uint_as_float(u[i] << 16), xv[2 * i], acc);
      acc = fmaf(__uint_as_float(u[i] & 0xFFFF0000u), xv[2 * i + 1], acc);
    }
  }
  return acc;
}

__device__ __forceinline__ void Opaque(uint4& v) {
  asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
}

__device__ __forceinline__ float WarpButterfly(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp streams a sequence of "units": R rows (of each of the kD weights) x JS chunks per lane,
// kS = kD·R·JS 16-byte loads per lane. Units are double-buffered (the next unit's loads are in
// flight while the current one is reduced) and the warp walks rows grid-stride, so each SM keeps a
// steady stream of loads without short-lived blocks. A row of J > JS chunks per lane spans
// U = ceil(J / JS) consecutive units (then only one x row: TryLaunchGemv). JS is a multiple of QN,
// so chunk j = u·JS + s feeds accumulator s mod QN (= j mod QN).
template <WeightFormat F, int QN, int JS, int R, bool kDual, bool kExpert>
__global__ void __launch_bounds__(kWarps * 32, 4) GemvKernel(GemvJob p) {
  static_assert(JS % QN == 0, "a unit must start at accumulator 0");
  constexpr int kD = kDual ? 2 : 1;
  constexpr int kCh = Ch<F>::v;
  PdlTrigger();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = p.w.n, nch = p.w.k / kCh;
  const int J = static_cast<int>((nch + 31) / 32);
  const int U = (J + JS - 1) / JS;
  const int64_t groups = (n + R - 1) / R;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t tw = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t my_groups = gw < groups ? (groups - gw + tw - 1) / tw : 0;
  const int64_t units = my_groups * U;
  const void* data[kD];
  int64_t begin = 0, count = p.m;
  if constexpr (kExpert) {
    // Which expert this block streams is known only after the routing kernels: no prefetch.
    PdlWait();
    const int slot = blockIdx.y;
    if (slot >= *p.num_active) return;
    const int e = p.active[slot];
    data[0] = p.edata[e];
    if constexpr (kDual) data[1] = p.edata2[e];
    begin = p.offsets[slot];
    count = p.offsets[slot + 1] - begin;
  } else {
    data[0] = p.w.data;
    if constexpr (kDual) data[1] = p.data2;
  }
  auto load = [&](int64_t i, uint4 (&wq)[kD][R][JS]) {
    const int64_t g = gw + (i / U) * tw;
    const int u = static_cast<int>(i % U);
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int s = 0; s < JS; ++s) {
          const int64_t row = g * R + r, c = lane + 32 * (u * JS + s);
          wq[d][r][s] = row < n && c < nch
                            ? LdgWeight(static_cast<const uint8_t*>(data[d]) + (row * nch + c) * 16)
                            : make_uint4(0, 0, 0, 0);
        }
  };
  float acc[kD][R][QN];
  auto compute = [&](int64_t i, uint4 (&wq)[kD][R][JS]) {
    const int64_t g = gw + (i / U) * tw;
    const int u = static_cast<int>(i % U);
    const int64_t row0 = g * R;
    const int64_t xoff = p.x_group_rows > 0 ? (row0 / p.x_group_rows) * p.x_group_stride : 0;
    for (int64_t mi = 0; mi < count; ++mi) {  // U > 1 only with count == 1
      const float* xrow;
      float* yrow;
      if constexpr (kExpert) {
        const int64_t pr = p.pairs[begin + mi];
        xrow = p.x + (pr / p.x_row_div) * p.ldx + xoff;
        yrow = p.y + pr * p.ldy;
      } else {
        xrow = p.x + mi * p.ldx + xoff;
        yrow = p.y + mi * p.ldy;
      }
      // The weights are the same for every x row; without this the compiler decodes them once
      // before the row loop and keeps JS x kCh floats per row live.
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int s = 0; s < JS; ++s) Opaque(wq[d][r][s]);
      if (u == 0) {
#pragma unroll
        for (int d = 0; d < kD; ++d)
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int q = 0; q < QN; ++q) acc[d][r][q] = 0.0f;
      }
      // Chunk s's x values (zeros past the row's end: that chunk is skipped below).
      auto load_x = [&](int s, float(&xv)[kCh]) {
        const int64_t c = lane + 32 * (u * JS + s);
        const float4* xp = reinterpret_cast<const float4*>(xrow + c * kCh);
#pragma unroll
        for (int v = 0; v < kCh / 4; ++v) {
          const float4 t = c < nch ? __ldg(xp + v) : make_float4(0.f, 0.f, 0.f, 0.f);
          xv[4 * v] = t.x;
          xv[4 * v + 1] = t.y;
          xv[4 * v + 2] = t.z;
          xv[4 * v + 3] = t.w;
        }
      };
      float xv[2][kCh];  // chunk s's x and, loading meanwhile, chunk s + 1's
      load_x(0, xv[0]);
#pragma unroll
      for (int s = 0; s < JS; ++s) {
        if (s + 1 < JS) load_x(s + 1, xv[(s + 1) % 2]);
        const int64_t c = lane + 32 * (u * JS + s);
        if (c < nch) {
#pragma unroll
          for (int d = 0; d < kD; ++d)
#pragma unroll
            for (int r = 0; r < R; ++r)
              acc[d][r][s % QN] = ChunkDot<F>(wq[d][r][s], xv[s % 2], acc[d][r][s % QN]);
        }
        // Keep chunk s + 2's x loads after this one's maths (hoisting them all spills): one chunk
        // of x in flight ahead of the maths, not a dependent round trip per chunk.
        asm volatile("" ::: "memory");
      }
      if (u == U - 1) {
        float out[kD][R];
#pragma unroll
        for (int d = 0; d < kD; ++d)
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if constexpr (QN == 1) {
              out[d][r] = WarpButterfly(acc[d][r][0]);
            } else {
              float sum = 0.0f;
#pragma unroll
              for (int q = 0; q < QN; ++q) sum += WarpButterfly(acc[d][r][q]);
              out[d][r] = sum;
            }
          }
        if (lane == 0) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (row0 + r >= n) continue;
            if constexpr (kDual) {
              yrow[row0 + r] = SwigluF(out[0][r], out[1][r], p.limit);
            } else {
              yrow[row0 + r] = out[0][r];
            }
          }
        }
      }
    }
  };
  uint4 wa[kD][R][JS], wb[kD][R][JS];
  if (units > 0) load(0, wa);
  if constexpr (!kExpert) PdlWait();  // the weights above are constant; x and y follow the stream
  for (int64_t i = 0; i < units; i += 2) {
    if (i + 1 < units) load(i + 1, wb);
    compute(i, wa);
    if (i + 1 >= units) break;
    if (i + 2 < units) load(i + 2, wa);
    compute(i + 1, wb);
  }
}

template <WeightFormat F, int QN, int JS, int R, bool kDual, bool kExpert>
void Launch(const GemvJob& j, int blocks_x, StreamHandle stream) {
  const unsigned by = kExpert ? static_cast<unsigned>(j.max_slots) : 1u;
  LaunchKernel(GemvKernel<F, QN, JS, R, kDual, kExpert>, dim3(static_cast<unsigned>(blocks_x), by),
               dim3(kWarps * 32), 0, stream, j);
  CUDA_CHECK_LAUNCH();
}

// The (QN, JS, R) unit shapes TryLaunchGemv picks (R per weight; kD·R·JS = 8 loads per lane).
template <WeightFormat F>
bool Dispatch(const GemvJob& j, int qn, int js, int blocks_x, StreamHandle stream) {
#define DSINFER_GEMV_CASE(QN, JS)                                                        \
  if (qn == QN && js == JS) {                                                            \
    if (j.dual) {                                                                        \
      if constexpr (8 / JS >= 2) {                                                       \
        if (j.edata) Launch<F, QN, JS, 4 / JS, true, true>(j, blocks_x, stream);         \
        else Launch<F, QN, JS, 4 / JS, true, false>(j, blocks_x, stream);                \
        return true;                                                                     \
      }                                                                                  \
      return false;                                                                      \
    }                                                                                    \
    if (j.edata) Launch<F, QN, JS, 8 / JS, false, true>(j, blocks_x, stream);            \
    else Launch<F, QN, JS, 8 / JS, false, false>(j, blocks_x, stream);                   \
    return true;                                                                         \
  }
  DSINFER_GEMV_CASE(8, 8)
  DSINFER_GEMV_CASE(4, 8)
  DSINFER_GEMV_CASE(4, 4)
  DSINFER_GEMV_CASE(2, 4)
  DSINFER_GEMV_CASE(2, 2)
#undef DSINFER_GEMV_CASE
  return false;
}

}  // namespace dsinfer::backend::cuda::gemv
