#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8mma_linear.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/qlinear.cuh"
#include "base/check.h"

namespace dsinfer::backend::cuda {

size_t WeightRef::bytes() const {
  if (mma && IsQuantized(format))
    return static_cast<size_t>((format == WeightFormat::kFp8 ? n * k : n * k / 2) +
                               MmaScaleBytes(n, k));
  switch (format) {
    case WeightFormat::kF32: return static_cast<size_t>(n * k * 4);
    case WeightFormat::kBf16: return static_cast<size_t>(n * k * 2);
    case WeightFormat::kFp8: {
      const int64_t sb = ((n + block - 1) / block) * ((k + block - 1) / block);
      return static_cast<size_t>(n * k + sb * (scale_format == ScaleFormat::kF32 ? 4 : 1));
    }
    case WeightFormat::kFp4: return static_cast<size_t>(n * k / 2 + n * (k / 32));
  }
  return 0;
}

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;  // output rows per thread group

template <WeightFormat F, bool kVec> struct Fmt;
// Elements per chunk: 16 bytes of weights in the vector path, 1 element in the scalar path.
template <> struct Fmt<WeightFormat::kF32, true> { static constexpr int kCh = 4; };
template <> struct Fmt<WeightFormat::kBf16, true> { static constexpr int kCh = 8; };
template <WeightFormat F> struct Fmt<F, false> { static constexpr int kCh = 1; };

// Chunk `c` of weight row `row` (kCh values): f32 or bf16 (FP8/FP4: qlinear_sm90.cu).
template <WeightFormat F, bool kVec>
__device__ __forceinline__ void LoadW(const WeightRef& w, const void* data, int64_t row, int64_t c,
                                      float* v) {
  constexpr int kCh = Fmt<F, kVec>::kCh;
  if constexpr (F == WeightFormat::kF32) {
    const float* p = static_cast<const float*>(data) + row * w.k + c * kCh;
    if constexpr (kVec) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(p));
      v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    } else {
      v[0] = __ldg(p);
    }
  } else {
    static_assert(F == WeightFormat::kBf16, "LoadW: f32 or bf16");
    const uint16_t* p = static_cast<const uint16_t*>(data) + row * w.k + c * kCh;
    if constexpr (kVec) {
      Bf16x8ToFloat(__ldg(reinterpret_cast<const uint4*>(p)), v);
    } else {
      v[0] = __uint_as_float(static_cast<uint32_t>(__ldg(p)) << 16);
    }
  }
}

template <int kCh, bool kVec>
__device__ __forceinline__ void LoadX(const float* p, float* v) {
  if constexpr (kVec) {
#pragma unroll
    for (int i = 0; i < kCh / 4; ++i) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(p) + i);
      v[4 * i] = q.x; v[4 * i + 1] = q.y; v[4 * i + 2] = q.z; v[4 * i + 3] = q.w;
    }
  } else {
    v[0] = __ldg(p);
  }
}

// Row maps: which x row feeds local row i, and which y row receives it.
struct DenseRowMap {
  const float* x; int64_t ldx; float* y; int64_t ldy; int64_t base;
  __device__ const float* X(int64_t i) const { return x + (base + i) * ldx; }
  __device__ float* Y(int64_t i) const { return y + (base + i) * ldy; }
};
struct PairRows {
  const float* x; int64_t ldx; float* y; int64_t ldy; const int32_t* pairs; int div;
  __device__ const float* X(int64_t i) const { return x + static_cast<int64_t>(pairs[i] / div) * ldx; }
  __device__ float* Y(int64_t i) const { return y + static_cast<int64_t>(pairs[i]) * ldy; }
};

// The shared body: rows [row0, row0 + kRows) of the weight against local rows [0, m).
// kR: output rows per thread group (never changes an element's reduction order).
// kD = 2: the fused SwiGLU pair. A second weight of the same shape and format (data2) is reduced
// against the same x in the same order, and the output is SwigluF(W1 row, W3 row, limit): the same
// bits as two launches and LaunchSwiglu. fp32 and bf16 weights (FP8/FP4: qlinear_sm90.cu).
template <WeightFormat F, bool kVec, int kTpr, int kMt, int kR, int kD, typename Rows>
__device__ __forceinline__ void LinearBody(const WeightRef& w, const void* data1, const void* data2,
                                           float limit, const Rows& rows, int64_t m, int64_t group_rows,
                                           int64_t group_stride, float (*red)[kD * kR * kMt]) {
  constexpr int kRows = kR;
  const void* const dd[2] = {data1, data2};
  constexpr int kCh = Fmt<F, kVec>::kCh;
  constexpr int kGroups = kThreads / kTpr;
  const int group = threadIdx.x / kTpr, t = threadIdx.x % kTpr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kGroups + group) * kRows;
  const int64_t nchunks = w.k / kCh;
  for (int64_t m0 = static_cast<int64_t>(blockIdx.z) * kMt; m0 < m; m0 += static_cast<int64_t>(gridDim.z) * kMt) {
    float acc[kD][kRows][kMt];
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int j = 0; j < kMt; ++j) acc[d][r][j] = 0.0f;
    const float* xr[kMt];
#pragma unroll
    for (int j = 0; j < kMt; ++j) xr[j] = m0 + j < m ? rows.X(m0 + j) : nullptr;
    for (int64_t c = t; c < nchunks; c += kTpr) {
      float xv[kMt][kCh];
      int64_t loaded_off = -1;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = row0 + r;
        if (row >= w.n) break;
        const int64_t off = group_rows > 0 ? (row / group_rows) * group_stride : 0;
        if (off != loaded_off) {
#pragma unroll
          for (int j = 0; j < kMt; ++j)
            if (xr[j]) LoadX<kCh, kVec>(xr[j] + off + c * kCh, xv[j]);
          loaded_off = off;
        }
#pragma unroll
        for (int d = 0; d < kD; ++d) {
          float wv[kCh];
          LoadW<F, kVec>(w, dd[d], row, c, wv);
#pragma unroll
          for (int j = 0; j < kMt; ++j) {
            if (!xr[j]) continue;
#pragma unroll
            for (int i = 0; i < kCh; ++i) acc[d][r][j] = fmaf(wv[i], xv[j][i], acc[d][r][j]);
          }
        }
      }
    }
    // Fixed-order reduction: butterfly within the warp, then the group's warps in order.
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int j = 0; j < kMt; ++j) {
          float v = acc[d][r][j];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
          acc[d][r][j] = v;
        }
    auto out = [&](float a, float b) { return kD == 2 ? SwigluF(a, b, limit) : a; };
    if constexpr (kTpr == 32) {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int j = 0; j < kMt; ++j)
            if (row0 + r < w.n && m0 + j < m) {
              rows.Y(m0 + j)[row0 + r] = out(acc[0][r][j], acc[kD - 1][r][j]);
            }
      }
    } else {
      if (lane == 0) {
#pragma unroll
        for (int d = 0; d < kD; ++d)
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int j = 0; j < kMt; ++j) red[warp][(d * kRows + r) * kMt + j] = acc[d][r][j];
      }
      __syncthreads();
      constexpr int kWarpsPerGroup = kTpr / 32;
      if (t < kRows * kMt) {
        const int r = t / kMt, j = t % kMt;
        float sum[kD];
#pragma unroll
        for (int d = 0; d < kD; ++d) {
          sum[d] = 0.0f;
#pragma unroll
          for (int q = 0; q < kWarpsPerGroup; ++q) sum[d] += red[group * kWarpsPerGroup + q][d * kRows * kMt + t];
        }
        if (row0 + r < w.n && m0 + j < m) rows.Y(m0 + j)[row0 + r] = out(sum[0], sum[kD - 1]);
      }
      __syncthreads();
    }
  }
}

// kD = 2: the fused SwiGLU pair (p.dual_*), 4 rows per group (two weights' chunks in flight).
template <WeightFormat F, bool kVec, int kTpr, int kMt, int kD = 1>
__global__ void __launch_bounds__(kThreads) LinearKernel(LinearParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float red[kThreads / 32][kD * kRows * kMt];
  DenseRowMap rows{p.x, p.ldx, p.y, p.ldy, 0};
  LinearBody<F, kVec, kTpr, kMt, kRows, kD>(p.w, p.w.data, p.dual_data, p.dual_limit, rows, p.m,
                                            p.x_group_rows, p.x_group_stride, red);
}

template <WeightFormat F, bool kVec, int kTpr, int kMt, int kD = 1>
__global__ void __launch_bounds__(kThreads) ExpertLinearKernel(ExpertLinearParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float red[kThreads / 32][kD * kRows * kMt];
  const int slot = blockIdx.y;
  if (slot >= *p.num_active) return;
  const int e = p.active[slot];
  const int32_t begin = p.offsets[slot], end = p.offsets[slot + 1];
  PairRows rows{p.x, p.ldx, p.y, p.ldy, p.pairs + begin, p.x_row_div};
  const void* d2 = kD == 2 ? p.dual_data[e] : nullptr;
  LinearBody<F, kVec, kTpr, kMt, kRows, kD>(p.shape, p.data[e], d2, p.dual_limit, rows, end - begin, 0,
                                            0, red);
}

// Elements per 16-byte chunk of the fp32 / bf16 kernels (LinearBody, the decode GEMV).
int ChunkElems(WeightFormat f) { return f == WeightFormat::kF32 ? 4 : 8; }

// The thread-group width: a function of (format, k) only (see the header: batch invariance).
int ThreadsPerRow(int64_t chunks) {
  if (chunks >= 256) return 256;
  if (chunks >= 128) return 128;
  if (chunks >= 64) return 64;
  return 32;
}

struct Plan {
  bool vec;
  int tpr;
  int mt;
  dim3 grid;
};

Plan MakePlan(const WeightRef& w, bool x_aligned, int64_t m_hint, int64_t y_blocks) {
  Plan pl{};
  const int ch = ChunkElems(w.format);
  pl.vec = w.k % ch == 0 && x_aligned;
  pl.tpr = pl.vec ? ThreadsPerRow(w.k / ch) : 32;
  pl.mt = m_hint <= 1 ? 1 : 4;
  const int64_t rows_per_block = (kThreads / pl.tpr) * kRows;
  const int64_t bx = (w.n + rows_per_block - 1) / rows_per_block;
  const int64_t mchunks = (std::max<int64_t>(m_hint, 1) + pl.mt - 1) / pl.mt;
  // Enough blocks to fill the GPU several times over; more m-chunks only re-read weights.
  const int64_t bz = std::min<int64_t>(mchunks, std::max<int64_t>(1, 2048 / std::max<int64_t>(1, bx * y_blocks)));
  pl.grid = dim3(static_cast<unsigned>(bx), static_cast<unsigned>(y_blocks), static_cast<unsigned>(std::min<int64_t>(bz, 65535)));
  return pl;
}


// fn(std::integral_constant<WeightFormat, f>{}) for the runtime format f (fp32 or bf16: FP8/FP4
// never reach these kernels): a kernel template's format argument from a runtime value.
template <typename Fn>
void WithFormat(WeightFormat f, Fn&& fn) {
  if (f == WeightFormat::kF32) fn(std::integral_constant<WeightFormat, WeightFormat::kF32>{});
  else fn(std::integral_constant<WeightFormat, WeightFormat::kBf16>{});
}

#define DSINFER_LINEAR_DISPATCH(KERNEL, FMT, PL, ARGS, STREAM)                                   \
  do {                                                                                           \
    auto go = [&](auto fmt_tag) {                                                                \
      constexpr WeightFormat kF = decltype(fmt_tag)::value;                                      \
      if (!PL.vec) {                                                                             \
        if (PL.mt == 1) LaunchKernel(KERNEL<kF, false, 32, 1>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS);        \
        else LaunchKernel(KERNEL<kF, false, 32, 4>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS);                   \
        return;                                                                                  \
      }                                                                                          \
      switch (PL.tpr * 10 + PL.mt) {                                                             \
        case 2561: LaunchKernel(KERNEL<kF, true, 256, 1>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;      \
        case 2564: LaunchKernel(KERNEL<kF, true, 256, 4>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;      \
        case 1281: LaunchKernel(KERNEL<kF, true, 128, 1>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;      \
        case 1284: LaunchKernel(KERNEL<kF, true, 128, 4>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;      \
        case 641: LaunchKernel(KERNEL<kF, true, 64, 1>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;        \
        case 644: LaunchKernel(KERNEL<kF, true, 64, 4>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;        \
        case 321: LaunchKernel(KERNEL<kF, true, 32, 1>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;        \
        default: LaunchKernel(KERNEL<kF, true, 32, 4>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;         \
      }                                                                                          \
    };                                                                                           \
    WithFormat(FMT, go);                                                                         \
    CUDA_CHECK_LAUNCH();                                                                         \
  } while (0)

// The fused SwiGLU pair: vector path at one x row (m-tile 1) only.
#define DSINFER_LINEAR_DUAL_DISPATCH(KERNEL, FMT, PL, ARGS, STREAM)                              \
  do {                                                                                           \
    auto go = [&](auto fmt_tag) {                                                                \
      constexpr WeightFormat kF = decltype(fmt_tag)::value;                                      \
      switch (PL.tpr) {                                                                          \
        case 256: LaunchKernel(KERNEL<kF, true, 256, 1, 2>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break; \
        case 128: LaunchKernel(KERNEL<kF, true, 128, 1, 2>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break; \
        case 64: LaunchKernel(KERNEL<kF, true, 64, 1, 2>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;   \
        default: LaunchKernel(KERNEL<kF, true, 32, 1, 2>, dim3(PL.grid), dim3(kThreads), 0, STREAM, ARGS); break;   \
      }                                                                                          \
    };                                                                                           \
    WithFormat(FMT, go);                                                                         \
    CUDA_CHECK_LAUNCH();                                                                         \
  } while (0)

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

// Which formats take the decode GEMV (KernelOptions; A/B timing and tests only: every choice gives
// the same bits). Default all: the GEMV streams bf16 rows at the copy bandwidth (the 1 GB head at
// 1.01x, docs/perf.md).
bool GemvEnabled(WeightFormat f, bool dual) {
  const KernelOptions& o = GetKernelOptions();
  if (dual && !o.gemv_dual) return false;
  if (f == WeightFormat::kF32) return o.gemv_f32;
  if (f == WeightFormat::kBf16) return o.gemv_bf16;
  return false;
}

bool TryLaunchGemv(const GemvJob& j, bool x_aligned, int64_t rows_hint, StreamHandle stream) {
  if (!GemvEnabled(j.w.format, j.dual) || !x_aligned || rows_hint > 4) return false;
  const int ch = ChunkElems(j.w.format);
  if (j.w.k % ch != 0) return false;
  const int64_t nch = j.w.k / ch;
  if (nch < 64) return false;
  const int qn = ThreadsPerRow(nch) / 32;
  const int64_t J = (nch + 31) / 32;
  // Chunks per lane per unit: the row's whole J when it fits (several rows per unit), else 8.
  const int js = qn == 8 ? 8 : (qn == 4 ? (J <= 4 ? 4 : 8) : (J <= 2 ? 2 : 4));
  const int64_t units_per_row = (J + js - 1) / js;
  if (units_per_row > 1 && (j.dual || j.edata || j.m != 1)) return false;
  if (j.dual && js == 8) return false;  // 2 x 8 chunks per lane per unit: too many registers
  const int rows = (j.dual ? 4 : 8) / js;
  if (j.x_group_rows > 0 && j.x_group_rows % rows != 0) return false;
  const int64_t groups = (j.w.n + rows - 1) / rows;
  constexpr int kWarpsPerBlock = 4;
  int64_t bx;
  if (j.edata) {
    // Per expert slot: about 4 row groups per warp (the double buffer needs a stream of units).
    bx = (groups + 4 * kWarpsPerBlock - 1) / (4 * kWarpsPerBlock);
  } else {
    // Persistent over the rows: at most 4 blocks of 4 warps per SM at a time.
    bx = std::min<int64_t>((groups + kWarpsPerBlock - 1) / kWarpsPerBlock, int64_t{SmCount()} * 4);
  }
  const int blocks_x = static_cast<int>(std::max<int64_t>(bx, 1));
  return j.w.format == WeightFormat::kF32 ? TryLaunchGemvF32(j, qn, js, blocks_x, stream)
                                          : TryLaunchGemvBf16(j, qn, js, blocks_x, stream);
}

namespace {

bool DenseAligned(const LinearParams& p) {
  return Aligned16(p.x) && p.ldx % 4 == 0 && p.x_group_stride % 4 == 0 && Aligned16(p.w.data);
}

GemvJob DenseJob(const LinearParams& p) {
  GemvJob j;
  j.w = p.w; j.x = p.x; j.ldx = p.ldx; j.m = p.m; j.x_group_rows = p.x_group_rows;
  j.x_group_stride = p.x_group_stride; j.y = p.y; j.ldy = p.ldy;
  return j;
}

GemvJob ExpertJob(const ExpertLinearParams& p) {
  GemvJob j;
  j.w = p.shape; j.edata = p.data; j.active = p.active; j.num_active = p.num_active;
  j.offsets = p.offsets; j.pairs = p.pairs; j.x_row_div = p.x_row_div; j.max_slots = p.max_slots;
  j.x = p.x; j.ldx = p.ldx; j.y = p.y; j.ldy = p.ldy;
  return j;
}

int64_t PairsPerSlot(const ExpertLinearParams& p) { return (p.total_pairs + p.max_slots - 1) / p.max_slots; }

QLinearArgs DenseArgs(const LinearParams& p) {
  QLinearArgs a;
  a.w[0] = p.w.data; a.s[0] = p.w.scale; a.x = p.x; a.ldx = p.ldx; a.m = p.m;
  a.group_rows = p.x_group_rows; a.group_stride = p.x_group_stride; a.y = p.y; a.ldy = p.ldy;
  a.xq = p.xq.q; a.xs = p.xq.s; a.ldq = p.xq.ldq; a.lds = p.xq.lds;
  return a;
}

QLinearArgs ExpertArgs(const ExpertLinearParams& p) {
  QLinearArgs a;
  a.ew[0] = p.data; a.es[0] = p.scale; a.x = p.x; a.ldx = p.ldx; a.x_row_div = p.x_row_div;
  a.y = p.y; a.ldy = p.ldy; a.active = p.active; a.num_active = p.num_active; a.offsets = p.offsets;
  a.pairs = p.pairs;
  a.xq = p.xq.q; a.xs = p.xq.s; a.ldq = p.xq.ldq; a.lds = p.xq.lds;
  return a;
}

int64_t ExpertXRows(const ExpertLinearParams& p) { return (p.total_pairs + p.x_row_div - 1) / p.x_row_div; }

}  // namespace

void LaunchLinear(const LinearParams& p, StreamHandle stream) {
  if (p.m <= 0 || p.w.n <= 0) return;
  if (p.w.mma) {
    LaunchMmaLinear(p, stream);
    return;
  }
  if (IsQuantized(p.w.format)) {
    LaunchQLinear(DenseArgs(p), p.w, false, p.m, 0, p.m, p.aq, stream);
    return;
  }
  const bool aligned = DenseAligned(p);
  if (TryLaunchGemv(DenseJob(p), aligned, p.m, stream)) return;
  const Plan pl = MakePlan(p.w, aligned, p.m, 1);
  DSINFER_LINEAR_DISPATCH(LinearKernel, p.w.format, pl, p, stream);
}

void LaunchExpertLinear(const ExpertLinearParams& p, StreamHandle stream) {
  if (p.max_slots <= 0 || p.total_pairs <= 0) return;
  if (p.shape.mma) {
    LaunchMmaExpertLinear(p, stream);
    return;
  }
  if (IsQuantized(p.shape.format)) {
    LaunchQLinear(ExpertArgs(p), p.shape, false, PairsPerSlot(p), p.max_slots, ExpertXRows(p), p.aq, stream);
    return;
  }
  const bool aligned = Aligned16(p.x) && p.ldx % 4 == 0;  // expert data pointers: cudaMalloc'd rows
  if (TryLaunchGemv(ExpertJob(p), aligned, PairsPerSlot(p), stream)) return;
  const Plan pl = MakePlan(p.shape, aligned, PairsPerSlot(p), p.max_slots);
  DSINFER_LINEAR_DISPATCH(ExpertLinearKernel, p.shape.format, pl, p, stream);
}

QuantizedRows LaunchLinearSwiglu(const LinearParams& p1, const WeightRef& w3, float* u, float limit,
                                 StreamHandle stream) {
  if (p1.m <= 0 || p1.w.n <= 0) return {};
  DSINFER_CHECK_MSG(p1.w.mma || !p1.swiglu_to_aq, "swiglu_to_aq needs the FP8-instruction weights");
  if (p1.w.mma) return LaunchMmaLinearSwiglu(p1, w3, u, limit, stream);
  if (IsQuantized(p1.w.format) && QLinearSupports(p1.w, true, nullptr)) {
    QLinearArgs a = DenseArgs(p1);
    a.w[1] = w3.data; a.s[1] = w3.scale; a.limit = limit;
    LaunchQLinear(a, p1.w, true, p1.m, 0, p1.m, p1.aq, stream);
    return {};
  }
  GemvJob j = DenseJob(p1);
  j.dual = true; j.data2 = w3.data; j.limit = limit;
  const bool aligned = DenseAligned(p1) && Aligned16(w3.data);
  if (!IsQuantized(p1.w.format) && TryLaunchGemv(j, aligned, p1.m, stream)) return {};
  const Plan pl = MakePlan(p1.w, aligned, p1.m, 1);
  if (!IsQuantized(p1.w.format) && pl.vec && pl.mt == 1) {
    LinearParams pd = p1;
    pd.dual_data = w3.data; pd.dual_limit = limit;
    DSINFER_LINEAR_DUAL_DISPATCH(LinearKernel, p1.w.format, pl, pd, stream);
    return {};
  }
  LaunchLinear(p1, stream);
  LinearParams p3 = p1;
  p3.w = w3;
  p3.y = u;
  LaunchLinear(p3, stream);
  LaunchSwiglu(p1.y, u, p1.m, p1.w.n, p1.ldy, limit, stream);
  return {};
}

QuantizedRows LaunchExpertLinearSwiglu(const ExpertLinearParams& p1, const void* const* w3_data,
                                       const void* const* w3_scale, float* u, float limit,
                                       StreamHandle stream) {
  if (p1.max_slots <= 0 || p1.total_pairs <= 0) return {};
  DSINFER_CHECK_MSG(p1.shape.mma || !p1.swiglu_to_aq,
                    "routed experts: swiglu_to_aq needs the FP8-instruction weights");
  if (p1.shape.mma) return LaunchMmaExpertLinearSwiglu(p1, w3_data, w3_scale, u, limit, stream);
  if (IsQuantized(p1.shape.format) && QLinearSupports(p1.shape, true, nullptr)) {
    QLinearArgs a = ExpertArgs(p1);
    a.ew[1] = w3_data; a.es[1] = w3_scale; a.limit = limit;
    LaunchQLinear(a, p1.shape, true, PairsPerSlot(p1), p1.max_slots, ExpertXRows(p1), p1.aq, stream);
    return {};
  }
  GemvJob j = ExpertJob(p1);
  j.dual = true; j.edata2 = w3_data; j.limit = limit;
  const bool aligned = Aligned16(p1.x) && p1.ldx % 4 == 0;
  if (!IsQuantized(p1.shape.format) && TryLaunchGemv(j, aligned, PairsPerSlot(p1), stream))
    return {};
  const Plan pl = MakePlan(p1.shape, aligned, PairsPerSlot(p1), p1.max_slots);
  if (!IsQuantized(p1.shape.format) && pl.vec && pl.mt == 1) {
    ExpertLinearParams pd = p1;
    pd.dual_data = w3_data; pd.dual_limit = limit;
    DSINFER_LINEAR_DUAL_DISPATCH(ExpertLinearKernel, p1.shape.format, pl, pd, stream);
    return {};
  }
  LaunchExpertLinear(p1, stream);
  ExpertLinearParams p3 = p1;
  p3.data = w3_data;
  p3.scale = w3_scale;
  p3.y = u;
  LaunchExpertLinear(p3, stream);
  LaunchSwiglu(p1.y, u, p1.total_pairs, p1.shape.n, p1.ldy, limit, stream);
  return {};
}

}  // namespace dsinfer::backend::cuda
