// The bf16 tensor-core linear with split fp32 operands (bf16_tc_linear.cuh).
//
// Split pre-pass: x's rows -> three bf16 planes per row, split[(r * 3 + part) * kp + c] (kp: k
// rounded up to 64, zero padded).
// GEMM: a block owns weight rows and a token tile, streams 64-column stages of W and of the token
// tile's three planes through shared memory (cp.async pipeline), and per 16-column step q runs,
// for each (m tile, n tile) of its warps, mma(x3), mma(x2), mma(x1) into the element's
// accumulator, one chain per k slice (Bf16TcSlices: few weight rows split k into up to 8 equal
// slices, so that one token's launch still has blocks for every SM), the slices then summed in
// order. Small m: 8 warps on one 8-token tile, (8 / slices) row tiles x the slices side by side,
// 128 / slices rows a block; many rows: warps 4 (2 row tiles each) x 2 (4 n tiles each), 128 rows
// and a 64-token tile, the slices one after another. The same chains and sum per element either
// way.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/launch.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128;    // weight rows per block
constexpr int kBK = 64;     // columns per stage
constexpr int kPitch = 72;  // bf16 per shared row of a stage (64 + 8: conflict-free fragments)

__device__ __forceinline__ uint16_t ToBf16Bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ float FromBf16Bits(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__global__ void __launch_bounds__(256)
    SplitKernel(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t kp, uint16_t* split) {
  PdlTrigger();
  PdlWait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * kp) return;
  const int64_t r = i / kp, c = i % kp;
  const float v = c < k ? x[r * ldx + c] : 0.0f;
  const uint16_t b1 = ToBf16Bits(v);
  const float r1 = v - FromBf16Bits(b1);  // exact
  const uint16_t b2 = ToBf16Bits(r1);
  const float r2 = r1 - FromBf16Bits(b2);  // exact, at most 8 significant bits: b3 == r2
  const uint16_t b3 = ToBf16Bits(r2);
  uint16_t* row = split + r * 3 * kp;
  row[c] = b1;
  row[kp + c] = b2;
  row[2 * kp + c] = b3;
}

__device__ __forceinline__ void MmaBf16(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                        float (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kMany: warps 4 (rows) x 2 (tokens), 2 row tiles x 4 n tiles each, 64 tokens, the k slices
// one after another; else 8 warps on 8 tokens: (8 / slices) row tiles x the slices side by side.
template <bool kMany>
struct TcCfg {
  static constexpr int kWarpsM = kMany ? 4 : 8;
  static constexpr int kWM = kMany ? 2 : 1;
  static constexpr int kWN = kMany ? 4 : 1;
  static constexpr int kBN = (kMany ? 2 : 1) * kWN * 8;
  static constexpr int kStages = kMany ? 3 : 4;
  static constexpr int kWElems = kBM * kPitch;
  static constexpr int kXElems = 3 * kBN * kPitch;  // per slice staged side by side
  // A stage's elements: the few-row tile stages 64 columns of each slice's x planes.
  static __host__ __device__ int StageElems(int slices) {
    return kWElems + (kMany ? 1 : slices) * kXElems;
  }
  static int Smem(int slices) { return kStages * StageElems(slices) * 2; }
};

// Each element: per k slice (`slices` equal runs of kp / slices columns, from the first), one
// mma chain from zero — per 16-column step mma(x3), mma(x2), mma(x1) — then the slices' results
// summed in slice order, t = s0, t += s1, ... (one slice: the chain alone). The same per element
// in both tiles.
template <bool kMany>
__global__ void __launch_bounds__(kThreads)
    Bf16TcKernel(Bf16TcLinearParams p, int64_t kp, int slices) {
  using C = TcCfg<kMany>;
  constexpr int kWM = C::kWM, kWN = C::kWN, kBN = C::kBN, kStages = C::kStages;
  PdlTrigger();
  extern __shared__ __align__(16) uint16_t tsm[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The few-row tile: block rows = 128 / slices, warp = (row tile, slice).
  const int tiles = kMany ? kBM / 16 : (kBM / 16) / slices;  // row tiles per block
  const int block_rows = kMany ? kBM : 16 * tiles;
  const int wm = kMany ? warp % C::kWarpsM : warp % tiles;
  const int wn = kMany ? warp / C::kWarpsM : 0;
  const int wsl = kMany ? 0 : warp / tiles;  // the warp's slice (few rows)
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * block_rows;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t kslice = kp / slices;
  const int64_t per_slice = kslice / kBK;
  // Pipeline steps: many rows walk all of k (the slices in turn); few rows take one stage of
  // every slice per step.
  const int64_t nsteps = kMany ? kp / kBK : per_slice;
  const int stage = C::StageElems(slices);
  auto w_at = [&](int s) { return tsm + s * stage; };
  auto x_at = [&](int s) { return tsm + s * stage + C::kWElems; };
  auto load = [&](int s, int64_t ks) {
    uint16_t* ws = w_at(s);
    for (int c = threadIdx.x; c < kBM * 8; c += kThreads) {  // 8 chunks of 8 bf16 per row
      const int r = c / 8, off = (c % 8) * 8;
      // Few rows: shared row r = slice * block_rows + block row.
      const int sl = kMany ? 0 : r / block_rows, br = kMany ? r : r % block_rows;
      const int64_t c0 = kMany ? ks * kBK : sl * kslice + ks * kBK;
      const bool ok = row0 + br < p.n && c0 + off < p.k;
      CpAsync16(ws + r * kPitch + off, ok ? p.w + (row0 + br) * p.k + c0 + off : p.w, ok);
    }
    uint16_t* xs = x_at(s);
    for (int c = threadIdx.x; c < (kMany ? 1 : slices) * 3 * kBN * 8; c += kThreads) {
      const int pr = c / 8, off = (c % 8) * 8;  // pr = (slice * 3 + part) * kBN + token
      const int sl = pr / (3 * kBN), part = (pr / kBN) % 3, i = pr % kBN;
      const int64_t c0 = kMany ? ks * kBK : sl * kslice + ks * kBK;
      const bool ok = tok0 + i < p.m;
      CpAsync16(xs + pr * kPitch + off,
                ok ? p.split + ((tok0 + i) * 3 + part) * kp + c0 + off : p.split, ok);
    }
  };
  float acc[kWM][kWN][4], total[kWM][kWN][4];
#pragma unroll
  for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
    for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = total[mi][ni][i] = 0.0f;
  PdlWait();  // the split planes come from the pre-pass
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) load(s, s);
    CpAsyncCommit();
  }
  for (int64_t ks = 0; ks < nsteps; ++ks) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (ks + kStages - 1 < nsteps)
      load(static_cast<int>((ks + kStages - 1) % kStages), ks + kStages - 1);
    CpAsyncCommit();
    const int s = static_cast<int>(ks % kStages);
    const uint16_t* ws = w_at(s) + wsl * block_rows * kPitch;
    const uint16_t* xs = x_at(s) + wsl * 3 * kBN * kPitch;
#pragma unroll
    for (int q = 0; q < kBK / 16; ++q) {
      uint32_t a[kWM][4];
#pragma unroll
      for (int mi = 0; mi < kWM; ++mi) {
        const uint16_t* tr = ws + ((wm * kWM + mi) * 16 + g) * kPitch + 16 * q + 2 * t;
        a[mi][0] = *reinterpret_cast<const uint32_t*>(tr);
        a[mi][1] = *reinterpret_cast<const uint32_t*>(tr + 8 * kPitch);
        a[mi][2] = *reinterpret_cast<const uint32_t*>(tr + 8);
        a[mi][3] = *reinterpret_cast<const uint32_t*>(tr + 8 * kPitch + 8);
      }
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni) {
        const int tl = (wn * kWN + ni) * 8 + g;  // the lane's B token in the block
        uint32_t b[3][2];
#pragma unroll
        for (int part = 0; part < 3; ++part) {
          const uint16_t* xr = xs + (part * kBN + tl) * kPitch + 16 * q + 2 * t;
          b[part][0] = *reinterpret_cast<const uint32_t*>(xr);
          b[part][1] = *reinterpret_cast<const uint32_t*>(xr + 8);
        }
#pragma unroll
        for (int mi = 0; mi < kWM; ++mi) {
          MmaBf16(a[mi], b[2][0], b[2][1], acc[mi][ni]);  // smallest part first
          MmaBf16(a[mi], b[1][0], b[1][1], acc[mi][ni]);
          MmaBf16(a[mi], b[0][0], b[0][1], acc[mi][ni]);
        }
      }
    }
    if (kMany && slices > 1 && (ks + 1) % per_slice == 0) {  // a slice's chain ends: fold it in
      const bool first = ks + 1 == per_slice;
#pragma unroll
      for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
        for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            total[mi][ni][i] = first ? acc[mi][ni][i] : total[mi][ni][i] + acc[mi][ni][i];
            acc[mi][ni][i] = 0.0f;
          }
    }
  }
  CpAsyncWait<0>();
  if (!kMany && slices > 1) {  // few rows: the slices' chains, summed in slice order
    __syncthreads();           // every warp is done with the stages: reuse them
    float* part = reinterpret_cast<float*>(tsm);
#pragma unroll
    for (int i = 0; i < 4; ++i) part[(warp * 32 + lane) * 4 + i] = acc[0][0][i];
    __syncthreads();
    if (wsl != 0) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = acc[0][0][i];
      for (int sl = 1; sl < slices; ++sl) v += part[((sl * tiles + wm) * 32 + lane) * 4 + i];
      total[0][0][i] = v;
    }
  } else if (slices == 1) {
#pragma unroll
    for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) total[mi][ni][i] = acc[mi][ni][i];
  }
  // c0, c1: row g, tokens 2t, 2t + 1; c2, c3: row g + 8.
#pragma unroll
  for (int mi = 0; mi < kWM; ++mi)
#pragma unroll
    for (int ni = 0; ni < kWN; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = row0 + (wm * kWM + mi) * 16 + g + 8 * (i / 2);
        const int64_t tok = tok0 + (wn * kWN + ni) * 8 + 2 * t + (i % 2);
        if (row < p.n && tok < p.m) p.y[tok * p.ldy + row] = total[mi][ni][i];
      }
}

int64_t PaddedK(int64_t k) { return (k + kBK - 1) / kBK * kBK; }

template <bool kMany>
void LaunchTc(const Bf16TcLinearParams& p, int slices, StreamHandle stream) {
  using C = TcCfg<kMany>;
  auto kernel = Bf16TcKernel<kMany>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    C::Smem(kMaxBf16TcSlices)));
    return true;
  }();
  (void)attr_set;
  const int64_t block_rows = kMany ? kBM : kBM / slices;
  const dim3 grid(static_cast<unsigned>((p.n + block_rows - 1) / block_rows),
                  static_cast<unsigned>((p.m + C::kBN - 1) / C::kBN));
  LaunchKernel(kernel, grid, dim3(kThreads), C::Smem(slices), stream, p, PaddedK(p.k), slices);
  CUDA_CHECK_LAUNCH();
}

void LaunchSplit(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* split,
                 StreamHandle stream) {
  const int64_t kp = PaddedK(k);
  const int64_t elems = m * kp;
  LaunchKernel(SplitKernel, dim3(static_cast<unsigned>((elems + 255) / 256)), dim3(256), 0, stream,
               x, ldx, m, k, kp, split);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t Bf16SplitElements(int64_t m, int64_t k) { return m * 3 * PaddedK(k); }

Status Bf16TcLinearParams::Validate() const {
  auto aligned16 = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (w == nullptr || x == nullptr || split == nullptr || y == nullptr)
    return InvalidArgument("bf16 tensor-core linear: a null weight, input, split or output");
  if (!Bf16TcLinearSupports(n, k))
    return InvalidArgument("bf16 tensor-core linear: k must be a positive multiple of 16, not " +
                           std::to_string(k));
  if (ldx < k || ldy < n) return InvalidArgument("bf16 tensor-core linear: strides below k / n");
  if (!aligned16(w) || !aligned16(split))
    return InvalidArgument(
        "bf16 tensor-core linear: weights and split rows must be 16-byte aligned");
  if (k_slices != 0) {
    const int64_t stages = PaddedK(k) / kBK;
    if (k_slices < 0 || k_slices > kMaxBf16TcSlices || (k_slices & (k_slices - 1)) != 0 ||
        stages % k_slices != 0)
      return InvalidArgument("bf16 tensor-core linear: " + std::to_string(k_slices) +
                             " k slices: a power of two up to " + std::to_string(kMaxBf16TcSlices) +
                             " dividing the " + std::to_string(stages) + " 64-column stages");
  }
  return Status::Ok();
}

bool Bf16TcLinearSupports(int64_t n, int64_t k) { return n > 0 && k > 0 && k % 16 == 0; }

bool Bf16TcManyTile(int64_t n, int64_t m) {
  using C = TcCfg<true>;
  return m >= kBf16TcManyRows &&
         (n + kBM - 1) / kBM * ((m + C::kBN - 1) / C::kBN) >= kBf16TcManyBlocks;
}

int Bf16TcSlices(int64_t n, int64_t k) {
  const int64_t stages = PaddedK(k) / kBK;
  int slices = 1;
  while (slices < kMaxBf16TcSlices && n * slices < kBf16TcSliceRows && stages % (2 * slices) == 0)
    slices *= 2;
  return slices;
}

void LaunchBf16Split(const float* x, int64_t ldx, int64_t m, int64_t k, uint16_t* split,
                     StreamHandle stream) {
  if (m <= 0) return;
  DSINFER_CHECK(x != nullptr && split != nullptr && ldx >= k && k > 0);
  LaunchSplit(x, ldx, m, k, split, stream);
}

void LaunchBf16TcLinear(const Bf16TcLinearParams& p, StreamHandle stream) {
  if (p.m <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  const int slices = p.k_slices > 0 ? p.k_slices : Bf16TcSlices(p.n, p.k);
  if (!p.presplit) LaunchSplit(p.x, p.ldx, p.m, p.k, p.split, stream);
  const bool many =
      p.tile == Bf16TcTile::kAuto ? Bf16TcManyTile(p.n, p.m) : p.tile == Bf16TcTile::kMany;
  if (many)
    LaunchTc<true>(p, slices, stream);
  else
    LaunchTc<false>(p, slices, stream);
}

}  // namespace dsinfer::backend::cuda
