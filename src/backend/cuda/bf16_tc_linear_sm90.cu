// The bf16 tensor-core linear with split fp32 operands (bf16_tc_linear.cuh).
//
// Split pre-pass: x's rows -> three bf16 planes per row, split[(r * 3 + part) * kp + c] (kp: k
// rounded up to 64, zero padded).
// GEMM (the 128-token tile on warpgroup MMA: bf16_tc_wg_sm90.cu): per 16-column step q of each k
// slice (Bf16TcSlices: matrices of few weight rows split k into up to 8 equal slices, so that one
// token's launch still has blocks for every SM) the warps run, for each (m tile, n tile) they own,
// mma(x3), mma(x2), mma(x1) into the slice's accumulator; the slices are then summed in order. Two
// tiles, the same chains and sum per element:
// * many rows (Bf16TcManyKernel): 128 weight rows x 64 tokens a block, warps 4 (2 row tiles each)
//   x 2 (4 n tiles each); 64-column stages of W and of the tokens' three planes through shared
//   memory (cp.async), the slices one after another;
// * few rows (Bf16TcFewKernel, decode): 8 tokens, 8 warps = (8 / slices) row tiles x the slices
//   side by side (128 / slices rows a block); W streamed through 8 stages of shared memory, the
//   tokens' parts read by each lane from global memory; the slices' results summed through shared
//   memory at the end.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "backend/cuda/bf16_tc_linear.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_bf16.cuh"

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

// One 16-column step of an element chain: the three parts, smallest first, into acc.
__device__ __forceinline__ void PartSteps(const uint32_t (&a)[4], const uint32_t (&b)[3][2],
                                          float (&acc)[4]) {
  MmaBf16(a, b[2][0], b[2][1], acc);
  MmaBf16(a, b[1][0], b[1][1], acc);
  MmaBf16(a, b[0][0], b[0][1], acc);
}
// A warp's A fragment of the 16 weight rows at tr (row g, column 2t of step q) in shared memory.
__device__ __forceinline__ void LoadA(const uint16_t* tr, uint32_t (&a)[4]) {
  a[0] = *reinterpret_cast<const uint32_t*>(tr);
  a[1] = *reinterpret_cast<const uint32_t*>(tr + 8 * kPitch);
  a[2] = *reinterpret_cast<const uint32_t*>(tr + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(tr + 8 * kPitch + 8);
}

// Every element, in both tiles: per k slice (`slices` equal runs of kp / slices columns, from the
// first), one chain from zero of PartSteps per 16 columns; then the slices' results summed in
// slice order, t = s0, t += s1, ... (one slice: the chain alone).

// The 64-token tile: 128 weight rows, warps 4 (rows: 2 row tiles each) x 2 (tokens: 4 n tiles
// each); W and the tokens' three planes staged per 64 columns, the slices one after another.
constexpr int kManyBN = 64, kManyStages = 3;
constexpr int kManyStageElems = kBM * kPitch + 3 * kManyBN * kPitch;
constexpr int kManySmem = kManyStages * kManyStageElems * 2;

__global__ void __launch_bounds__(kThreads)
    Bf16TcManyKernel(Bf16TcLinearParams p, int64_t kp, int slices) {
  constexpr int kWM = 2, kWN = 4;
  PdlTrigger();
  extern __shared__ __align__(16) uint16_t tsm[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp % 4, wn = warp / 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kManyBN;
  const int64_t nsteps = kp / kBK, per_slice = nsteps / slices;
  auto w_at = [&](int s) { return tsm + s * kManyStageElems; };
  auto x_at = [&](int s) { return tsm + s * kManyStageElems + kBM * kPitch; };
  auto load = [&](int s, int64_t ks) {
    const int64_t c0 = ks * kBK;
    uint16_t* ws = w_at(s);
    for (int c = threadIdx.x; c < kBM * 8; c += kThreads) {  // 8 chunks of 8 bf16 per row
      const int r = c / 8, off = (c % 8) * 8;
      const bool ok = row0 + r < p.n && c0 + off < p.k;
      CpAsync16(ws + r * kPitch + off, ok ? p.w + (row0 + r) * p.k + c0 + off : p.w, ok);
    }
    uint16_t* xs = x_at(s);
    for (int c = threadIdx.x; c < 3 * kManyBN * 8; c += kThreads) {
      const int pr = c / 8, off = (c % 8) * 8;  // pr = part * kManyBN + token
      const int part = pr / kManyBN, i = pr % kManyBN;
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
  PipelineFill<kManyStages>(nsteps, load);
  for (int64_t ks = 0; ks < nsteps; ++ks) {
    const int s = PipelineAdvance<kManyStages>(ks, nsteps, load);
    const uint16_t* ws = w_at(s);
    const uint16_t* xs = x_at(s);
#pragma unroll
    for (int q = 0; q < kBK / 16; ++q) {
      uint32_t a[kWM][4];
#pragma unroll
      for (int mi = 0; mi < kWM; ++mi)
        LoadA(ws + ((wm * kWM + mi) * 16 + g) * kPitch + 16 * q + 2 * t, a[mi]);
#pragma unroll
      for (int ni = 0; ni < kWN; ++ni) {
        const int tl = (wn * kWN + ni) * 8 + g;  // the lane's B token in the block
        uint32_t b[3][2];
#pragma unroll
        for (int part = 0; part < 3; ++part) {
          const uint16_t* xr = xs + (part * kManyBN + tl) * kPitch + 16 * q + 2 * t;
          b[part][0] = *reinterpret_cast<const uint32_t*>(xr);
          b[part][1] = *reinterpret_cast<const uint32_t*>(xr + 8);
        }
#pragma unroll
        for (int mi = 0; mi < kWM; ++mi) PartSteps(a[mi], b, acc[mi][ni]);
      }
    }
    if ((ks + 1) % per_slice == 0) {  // a slice's chain ends: fold it in
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

// The 8-token tile, for few rows (decode): a weight stream. 8 warps = (8 / slices) row tiles x
// the slices side by side (128 / slices weight rows a block); each stage holds 64 columns of every
// slice of the block's rows (16 KB), kFewStages of them in flight so that one block per SM keeps
// enough bytes on the way; the 8 tokens' parts are read from global memory (L2) by each lane.
constexpr int kFewStages = 8;
constexpr int kFewStageElems = kBM * kPitch;
constexpr int kFewSmem = kFewStages * kFewStageElems * 2;
constexpr int kFewChunks = kBM * 8 / kThreads;  // a thread's 16-byte copies per stage

__global__ void __launch_bounds__(kThreads)
    Bf16TcFewKernel(Bf16TcLinearParams p, int64_t kp, int slices) {
  PdlTrigger();
  extern __shared__ __align__(16) uint16_t tsm[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tiles = (kBM / 16) / slices, block_rows = 16 * tiles;
  const int wm = warp % tiles, wsl = warp / tiles;  // the warp's row tile and slice
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * block_rows;
  const int64_t tok = static_cast<int64_t>(blockIdx.y) * 8 + g;  // the lane's B token
  const int64_t kslice = kp / slices, nsteps = kslice / kBK;
  // The thread's chunks of a stage: shared row r = slice * block_rows + block row, 8 columns at
  // off; their sources at step 0 (a step adds 64 columns).
  const int off = (threadIdx.x % 8) * 8;
  const uint16_t* src[kFewChunks];
  int64_t col0[kFewChunks];
  bool row_ok[kFewChunks];
#pragma unroll
  for (int i = 0; i < kFewChunks; ++i) {
    const int r = threadIdx.x / 8 + i * (kThreads / 8);
    const int sl = r / block_rows, br = r % block_rows;
    col0[i] = sl * kslice + off;
    row_ok[i] = row0 + br < p.n;
    src[i] = p.w + (row_ok[i] ? (row0 + br) * p.k + col0[i] : 0);
  }
  auto load = [&](int s, int64_t ks) {
    uint16_t* ws = tsm + s * kFewStageElems;
#pragma unroll
    for (int i = 0; i < kFewChunks; ++i) {
      const int r = threadIdx.x / 8 + i * (kThreads / 8);
      const bool ok = row_ok[i] && col0[i] + ks * kBK < p.k;
      CpAsync16(ws + r * kPitch + off, ok ? src[i] + ks * kBK : p.w, ok);
    }
  };
  // The lane's token's three parts at its slice's columns 2t (+ 16 q, + 8).
  const bool tok_ok = tok < p.m;
  const uint16_t* xrow = p.split + (tok_ok ? tok : 0) * 3 * kp + wsl * kslice + 2 * t;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  PdlWait();  // the split planes come from the pre-pass
  PipelineFill<kFewStages>(nsteps, load);
  for (int64_t ks = 0; ks < nsteps; ++ks) {
    uint32_t b[kBK / 16][3][2];  // the step's B fragments, loaded before waiting for W
#pragma unroll
    for (int q = 0; q < kBK / 16; ++q)
#pragma unroll
      for (int part = 0; part < 3; ++part) {
        const uint16_t* xr = xrow + part * kp + ks * kBK + 16 * q;
        b[q][part][0] = tok_ok ? *reinterpret_cast<const uint32_t*>(xr) : 0u;
        b[q][part][1] = tok_ok ? *reinterpret_cast<const uint32_t*>(xr + 8) : 0u;
      }
    const uint16_t* ws = tsm + PipelineAdvance<kFewStages>(ks, nsteps, load) * kFewStageElems +
                         (wsl * block_rows + wm * 16 + g) * kPitch + 2 * t;
#pragma unroll
    for (int q = 0; q < kBK / 16; ++q) {
      uint32_t a[4];
      LoadA(ws + 16 * q, a);
      PartSteps(a, b[q], acc);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every warp is done with the stages: their memory takes the slices' results
  float* part = reinterpret_cast<float*>(tsm);
#pragma unroll
  for (int i = 0; i < 4; ++i) part[(warp * 32 + lane) * 4 + i] = acc[i];
  __syncthreads();
  if (wsl != 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float v = acc[i];
    for (int sl = 1; sl < slices; ++sl) v += part[((sl * tiles + wm) * 32 + lane) * 4 + i];
    const int64_t row = row0 + wm * 16 + g + 8 * (i / 2);
    const int64_t tk = static_cast<int64_t>(blockIdx.y) * 8 + 2 * t + (i % 2);
    if (row < p.n && tk < p.m) p.y[tk * p.ldy + row] = v;
  }
}

int64_t PaddedK(int64_t k) { return (k + kBK - 1) / kBK * kBK; }

template <typename Kernel>
void LaunchTc(Kernel kernel, int smem, int64_t block_rows, int64_t tokens,
              const Bf16TcLinearParams& p, int slices, StreamHandle stream) {
  const dim3 grid(static_cast<unsigned>((p.n + block_rows - 1) / block_rows),
                  static_cast<unsigned>((p.m + tokens - 1) / tokens));
  LaunchKernel(kernel, grid, dim3(kThreads), smem, stream, p, PaddedK(p.k), slices);
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
  return m >= kBf16TcManyRows &&
         (n + kBM - 1) / kBM * ((m + kManyBN - 1) / kManyBN) >= kBf16TcManyBlocks;
}

bool Bf16TcManyTileFor(Bf16TcTile tile, int64_t n, int64_t m) {
  return tile == Bf16TcTile::kAuto ? Bf16TcManyTile(n, m) : tile != Bf16TcTile::kFew;
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
  if ((p.tile == Bf16TcTile::kWg || (p.tile == Bf16TcTile::kAuto && p.m >= kBf16TcWgRows)) &&
      TryLaunchBf16TcWg(p, PaddedK(p.k), slices, stream))
    return;
  const bool many = Bf16TcManyTileFor(p.tile, p.n, p.m);
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(Bf16TcManyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kManySmem));
    CUDA_CHECK(cudaFuncSetAttribute(Bf16TcFewKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kFewSmem));
    return true;
  }();
  (void)attr_set;
  if (many)
    LaunchTc(Bf16TcManyKernel, kManySmem, kBM, kManyBN, p, slices, stream);
  else
    LaunchTc(Bf16TcFewKernel, kFewSmem, kBM / slices, 8, p, slices, stream);
}

}  // namespace dsinfer::backend::cuda
