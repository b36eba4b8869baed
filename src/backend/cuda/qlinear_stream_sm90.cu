// The streamed FP8/FP4 decode linear (qlinear_stream.cuh): one token tile (up to 8 rows per unit),
// weights through the bulk copy engine.
//
// Why: the register kernel (QLinearKernel) loads a warp's slice into registers, waits, computes,
// then loads the next: the warps of a block (and the blocks started together) move in step, so
// HBM idles while they compute, and the bytes in flight are bounded by registers. Measured on an
// H200 (bench_gemv, docs/perf.md round 10) the routed experts read at 1.5-1.8 TB/s and the big FP8
// projections at ~2.6 TB/s of a 4.2 TB/s copy rate. Here each warp keeps `stages` chunk copies in
// flight in its own shared-memory ring (cp.async.bulk completing on an mbarrier per stage), issued
// by its lane 0 as soon as a stage is read out, across items and rounds: loads never wait for
// compute. Dense weights start streaming before the grid-dependency wait.
//
// Layout of the dynamic shared memory: [staged x: rows_x x ldqs f16][staged scales: rows_x x nblk
// f32] (in-kernel quantization only) [partials: 2 rounds x items x kD x 128 f32][ring: warps x
// stages x stage_bytes][mbarriers: warps x stages].
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "backend/cuda/check.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/qlinear_stream.cuh"
#include "backend/cuda/qlinear_stream_plan.h"
#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

namespace {

using namespace qcore;

constexpr int kStreamMaxWarps = 8;  // warps per block: 8, or 4 with DSINFER_QLINEAR_STREAM_WARPS=4
constexpr int kStreamMaxThreads = 32 * kStreamMaxWarps;
constexpr int64_t kStageXBytes = 64 * 1024;   // in-kernel quantized rows staged up to this size
constexpr int64_t kBlockBudget = 112 * 1024;  // the ring's budget: room for two blocks per SM (and
                                              // for other kernels beside one)
constexpr int kMaxTokens = 8;                 // one mma token tile
constexpr int64_t kMaxSmem = 227 * 1024;      // dynamic shared memory of one block (sm_90)

// k pairs per streamed chunk: ~4 KB of weights per stage (FP4 pair: 512 bytes a matrix, FP8 1024).
template <bool kFp4, int kD>
constexpr int kChunkPairs = kFp4 ? 4 : (kD == 2 ? 2 : 4);

struct StreamArgs {
  QLinearArgs a;
  qstream::Plan plan;
  int slots = 0;        // experts: the launch's slots (active slots beyond them are not run)
  int64_t tiles_n = 0;  // 16-row tiles of the weight
  int rows_x = 0;       // > 0: x quantized in the kernel, rows [0, rows_x) staged
  int64_t width = 0;    // staged columns
  int ldqs = 0;         // staged row stride (f16)
  int nblk = 0;         // staged 128-column blocks per row
  uint32_t red_off = 0, ring_off = 0, bar_off = 0, stage_bytes = 0;
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void FenceMbarInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Generic-proxy reads of a stage before the copy engine (async proxy) overwrites it.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// Weights are read once per step: evict-first in L2, so that they do not push out the
// activations and attention state the next kernels read.
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void BulkCopyG2S(void* dst, const void* src, uint32_t bytes,
                                            uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar)), "l"(policy)
      : "memory");
}
// Waits for the phase of `parity` to complete. A copy that never lands (a bug) traps after ~2^26
// polls instead of hanging the device.
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  uint32_t ok = 0;
  for (uint32_t polls = 0;; ++polls) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ok)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
    if (ok) return;
    if (polls > (1u << 26)) __trap();
  }
}

template <bool kFp4, int kD, bool kExpert>
__global__ void __launch_bounds__(kStreamMaxThreads, 2) QLinearStreamKernel(const StreamArgs sa) {
  using C = QCfg<kFp4, kD>;
  constexpr int kP = C::kP, kKs = C::kKs, kAw = C::kAw;
  constexpr int kCP = kChunkPairs<kFp4, kD>;
  constexpr int64_t kPB = kFp4 ? 512 : 1024;  // bytes of one k pair of a 16-row tile
  static_assert(kP % kCP == 0 && kCP % 2 == 0, "chunks hold whole 128-column blocks");
  PdlTrigger();
  const QLinearArgs& p = sa.a;
  const qstream::Plan& pl = sa.plan;
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int block = static_cast<int>(blockIdx.x);
  const int stages = pl.stages;
  uint8_t* ring = smem + sa.ring_off + static_cast<size_t>(warp) * stages * sa.stage_bytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + sa.bar_off) + warp * stages;
  uint16_t* xq_s = reinterpret_cast<uint16_t*>(smem);
  float* xs_s = reinterpret_cast<float*>(smem + static_cast<size_t>(sa.rows_x) * sa.ldqs * 2);
  float* red = reinterpret_cast<float*>(smem + sa.red_off);
  if (lane == 0) {
    for (int s = 0; s < stages; ++s) MbarInit(&bars[s], 1);
    FenceMbarInit();
  }
  __syncwarp();

  const int64_t tiles_n = sa.tiles_n, kpairs = p.k / 64;
  // Units: dense, the row tiles; experts, (token tile, slot, row tile) over the active slots with
  // as many token tiles as the fullest slot needs (one at decode sizes).
  int64_t units = tiles_n;
  int nact = 1;
  if constexpr (kExpert) {
    PdlWait();
    nact = min(*p.num_active, sa.slots);
    int most = 0;
    for (int s = lane; s < nact; s += 32) most = max(most, p.offsets[s + 1] - p.offsets[s]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
    units = static_cast<int64_t>((most + kMaxTokens - 1) / kMaxTokens) * nact * tiles_n;
  }
  struct Geom {
    int64_t rt;
    int slot, begin, m0, ntok;
  };
  auto geom = [&](int64_t u) {
    Geom q;
    q.rt = u % tiles_n;
    if constexpr (kExpert) {
      const int64_t v = u / tiles_n;
      q.slot = static_cast<int>(v % nact);
      q.m0 = static_cast<int>(v / nact) * kMaxTokens;
      q.begin = p.offsets[q.slot];
      q.ntok = min(p.offsets[q.slot + 1] - q.begin - q.m0, kMaxTokens);
    } else {
      q.slot = 0;
      q.m0 = 0;
      q.begin = 0;
      q.ntok = static_cast<int>(p.m);
    }
    return q;
  };
  auto valid = [&](int64_t u) { return geom(u).ntok > 0; };  // an expert token tile with tokens
  auto weights = [&](int slot, int d) -> const uint8_t* {
    if constexpr (kExpert) return static_cast<const uint8_t*>(p.ew[d][p.active[slot]]);
    return static_cast<const uint8_t*>(p.w[d]);
  };
  auto scales = [&](int slot, int d) -> const void* {
    if constexpr (kExpert) return p.es[d][p.active[slot]];
    return p.s[d];
  };
  const int rounds = qstream::RoundsOf(pl, units, block);

  // The copy issuer's cursor (every lane walks it; lane 0 issues): `stages` chunks ahead.
  qstream::PlanCursor pc = qstream::FirstChunk(pl, units, block, warp, rounds, valid);
  int issued = 0;
  const uint64_t policy = EvictFirstPolicy();
  auto issue_next = [&] {
    if (pc.done) return;
    if (lane == 0) {
      const int i = pc.item(pl, warp), s = i % pl.slices;
      const Geom q = geom(qstream::UnitOf(pl, block, pc.round, i));
      const int64_t rt = q.rt;
      const int slot = q.slot;
      const int pair0 = s * kP + pc.chunk * kCP;
      const int np = min(kCP, qstream::PairsOfSlice(pl, s) - pc.chunk * kCP);
      const uint32_t wbytes = static_cast<uint32_t>(np * kPB), sbytes = kFp4 ? np * 32u : 0u;
      uint8_t* dst = ring + static_cast<size_t>(issued % stages) * sa.stage_bytes;
      uint64_t* bar = &bars[issued % stages];
      FenceProxyAsync();
      MbarArriveExpectTx(bar, kD * (wbytes + sbytes));
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        BulkCopyG2S(dst + d * kCP * kPB, weights(slot, d) + (rt * kpairs + pair0) * kPB, wbytes,
                    bar, policy);
        if constexpr (kFp4) {
          BulkCopyG2S(dst + kD * kCP * kPB + d * kCP * 32,
                      static_cast<const uint8_t*>(scales(slot, d)) + (rt * kpairs + pair0) * 32,
                      sbytes, bar, policy);
        }
      }
    }
    ++issued;
    qstream::NextChunk(pl, units, block, warp, pc, rounds, valid);
  };
  // Dense weights are constant: their first chunks stream while the previous kernel finishes.
  for (int s = 0; s < stages; ++s) issue_next();
  if constexpr (!kExpert) PdlWait();

  if (sa.rows_x > 0) {  // act_quant of the rows into shared memory (QuantBlock: the same bits)
    // A warp's blocks kStageBatch at a time, their loads in flight together (the weights' first
    // chunks are landing meanwhile).
    constexpr int kStageBatch = 8;
    const int total = sa.rows_x * sa.nblk;
    for (int base = warp; base < total; base += pl.warps * kStageBatch) {
      float4 v[kStageBatch];
#pragma unroll
      for (int j = 0; j < kStageBatch; ++j) {
        const int item = base + j * pl.warps;
        const int r = item / sa.nblk, b = item % sa.nblk;
        const int64_t col = static_cast<int64_t>(b) * kQb + 4 * lane;
        v[j] = LoadX4(p.x + r * p.ldx + col, item < total && col < sa.width);
      }
#pragma unroll
      for (int j = 0; j < kStageBatch; ++j) {
        const int item = base + j * pl.warps;
        if (item >= total) break;  // warp-uniform
        const int r = item / sa.nblk, b = item % sa.nblk;
        const int64_t col = static_cast<int64_t>(b) * kQb + 4 * lane;
        float sc;
        const uint2 q = QuantBlock(v[j], &sc);
        if (col < sa.width) *reinterpret_cast<uint2*>(xq_s + r * sa.ldqs + col) = q;
        if (lane == 0) xs_s[r * sa.nblk + b] = sc;
      }
    }
    __syncthreads();
  }

  const int items = qstream::ItemsPerRound(pl);
  auto partial = [&](int round, int item, int d) {
    return red + ((static_cast<size_t>(round & 1) * items + item) * kD + d) * 128;
  };
  auto xrow = [&](const Geom& q, int local) -> int32_t {
    if constexpr (kExpert) return p.pairs[q.begin + q.m0 + local] / p.x_row_div;
    return local;
  };
  // Round r's units: each output the sum of its slices' partials in slice order.
  auto reduce = [&](int r) {
    for (int o = threadIdx.x; o < pl.units_per_round * 128; o += 32 * pl.warps) {
      const int jj = o / 128, l = (o % 128) / 4, ii = o % 4;
      const int64_t u = qstream::UnitOf(pl, block, r, jj * pl.slices);
      if (u >= units || !valid(u)) continue;
      const Geom q = geom(u);
      const int64_t row = q.rt * 16 + l / 4 + 8 * (ii / 2);
      const int tok = 2 * (l % 4) + (ii % 2);
      float v[kD];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        v[d] = partial(r, jj * pl.slices, d)[o % 128];
        for (int s = 1; s < pl.slices; ++s) v[d] += partial(r, jj * pl.slices + s, d)[o % 128];
      }
      if (row < p.n && tok < q.ntok) {
        int64_t yr = tok;
        if constexpr (kExpert) yr = p.pairs[q.begin + q.m0 + tok];
        p.y[yr * p.ldy + row] = kD == 2 ? SwigluF(v[0], v[kD - 1], p.limit) : v[0];
      }
    }
  };
  int reduced = 0;  // rounds [0, reduced) are written out
  auto reduce_before = [&](int r_end) {
    for (; reduced < r_end; ++reduced) {
      __syncthreads();  // every warp's partials of the round are in place
      reduce(reduced);
    }
  };

  int consumed = 0;
  qstream::PlanCursor cc = qstream::FirstChunk(pl, units, block, warp, rounds, valid);
  while (!cc.done) {
    reduce_before(cc.round);
    const int round = cc.round, i = cc.item(pl, warp), s = i % pl.slices;
    const Geom q = geom(qstream::UnitOf(pl, block, round, i));
    const int64_t row0 = q.rt * 16;
    const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
    const int64_t k0 = static_cast<int64_t>(s) * kKs;
    const int npairs = qstream::PairsOfSlice(pl, s);
    BSrc<1> bs;
    int64_t qld, sld;
    if (sa.rows_x > 0) {
      bs.qbase = xq_s + goff + k0;
      qld = sa.ldqs;
      bs.sbase = xs_s + (goff + k0) / kQb;
      sld = sa.nblk;
    } else {
      bs.qbase = p.xq + goff + k0;
      qld = p.ldq;
      bs.sbase = p.xs + (goff + k0) / kQb;
      sld = p.lds;
    }
    bs.qoff[0] = g < q.ntok ? static_cast<int32_t>(xrow(q, g) * qld) : -1;
    bs.soff[0][0] = 2 * t < q.ntok ? static_cast<int32_t>(xrow(q, 2 * t) * sld) : -1;
    bs.soff[0][1] = 2 * t + 1 < q.ntok ? static_cast<int32_t>(xrow(q, 2 * t + 1) * sld) : -1;
    // FP8: the slice's 128 x 128 block scales (one per two pairs), loaded while the chunk lands.
    float sfb[kD][kFp4 ? 1 : kP / 2];
    if constexpr (!kFp4) {
      const int64_t sidx = (row0 >> 7) * ((p.k + 127) >> 7) + s * (kKs / 128);
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int b = 0; b < kP / 2; ++b)
          sfb[d][b] = 2 * b < npairs ? ScaleAt(scales(q.slot, d), p.scale_format, sidx + b) : 0.0f;
    }

    float acc[kD][1][4], blk[kD][1][4];
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[d][0][e] = blk[d][0][e] = 0.0f;
    const int nchunks = qstream::ChunksOfSlice(pl, s);
#pragma unroll
    for (int ch = 0; ch < kP / kCP; ++ch) {  // unrolled: pair indices are compile-time constants
      if (ch >= nchunks) break;              // warp-uniform
      const int stage = consumed % stages;
      MbarWait(&bars[stage], static_cast<uint32_t>((consumed / stages) & 1));
      const uint8_t* src = ring + static_cast<size_t>(stage) * sa.stage_bytes;
      uint4 a[kD][kCP * kAw];
      uint32_t sb[kD][kCP];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        // Only the chunk's pairs: a short last chunk leaves the rest of the stage unwritten.
#pragma unroll
        for (int c = 0; c < kCP * kAw; ++c)
          a[d][c] = ch * kCP + c / kAw < npairs
                        ? *reinterpret_cast<const uint4*>(src + d * kCP * kPB + c * 512 + lane * 16)
                        : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int c = 0; c < kCP; ++c)
          sb[d][c] = kFp4 && ch * kCP + c < npairs
                         ? *reinterpret_cast<const uint32_t*>(src + kD * kCP * kPB + d * kCP * 32 +
                                                              c * 32 + 4 * g)
                         : 0u;
      }
      __syncwarp();  // the stage is read out: refill it
      ++consumed;
      issue_next();
#pragma unroll
      for (int c = 0; c < kCP; ++c) {
        const int pp = ch * kCP + c;
        if (pp >= npairs) break;  // warp-uniform
        uint4 aw[kD][kAw];
        float sf[kD];
        uint32_t sw[kD];
#pragma unroll
        for (int d = 0; d < kD; ++d) {
#pragma unroll
          for (int w = 0; w < kAw; ++w) aw[d][w] = a[d][c * kAw + w];
          sf[d] = kFp4 ? 0.0f : sfb[d][kFp4 ? 0 : pp / 2];
          sw[d] = sb[d][c];
        }
        PairMma<kFp4, 1, kD>(aw, sf, sw, bs, pp, npairs, acc, blk);
      }
      qstream::NextChunk(pl, units, block, warp, cc, rounds, valid);
    }
#pragma unroll
    for (int d = 0; d < kD; ++d)
      *reinterpret_cast<float4*>(partial(round, i, d) + lane * 4) =
          make_float4(acc[d][0][0], acc[d][0][1], acc[d][0][2], acc[d][0][3]);
  }
  reduce_before(rounds);
}

// Streamed launches so far (QLinearStreamLaunches: the tests check which path a launch took).
std::atomic<int64_t> stream_launches{0};

// An integer switch from the environment (read at every launch, so that tests can change it).
int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// DSINFER_QLINEAR_STREAM_GRID=n caps the persistent grid (tests: many rounds per block on small
// shapes; the same bits for any grid).
int StreamGridCap() { return std::max(0, EnvInt("DSINFER_QLINEAR_STREAM_GRID", 0)); }

// DSINFER_QLINEAR_STREAM_STAGES=n (1..16): ring stages per warp for A/B sweeps, instead of the
// depth the shared-memory budget gives (a launch whose shared memory would pass 227 KB takes the
// register kernel).
int StreamStagesOverride() { return std::clamp(EnvInt("DSINFER_QLINEAR_STREAM_STAGES", 0), 0, 16); }

// Warps per block (DSINFER_QLINEAR_STREAM_WARPS=4|8, default 8): four halve a block's ring (and
// its share of an SM), for A/B against neighbours that want to sit resident beside it.
int StreamWarps() {
  return EnvInt("DSINFER_QLINEAR_STREAM_WARPS", kStreamMaxWarps) == 4 ? 4 : kStreamMaxWarps;
}

// Resident blocks per SM the persistent grid takes (DSINFER_QLINEAR_STREAM_BLOCKS=1..4, default
// 1; the occupancy caps it). Two 8-warp blocks give every SM 16 warps of copies and compute, but
// take all of its registers: a kernel on another stream (the gate GEMV and route beside the shared
// expert, the indexer's chain beside wq_b) could then not start on any SM until this one ends. One
// leaves half of each SM free; its 8 warps still keep 70-104 KB of copies in flight per SM (the
// ~50 KB that 4.2 TB/s x ~1.5 us needs).
int StreamBlocksPerSm() { return std::clamp(EnvInt("DSINFER_QLINEAR_STREAM_BLOCKS", 1), 1, 4); }

template <bool kFp4, int kD, bool kExpert>
void LaunchStream(const StreamArgs& sa, size_t smem, StreamHandle stream) {
  auto kernel = QLinearStreamKernel<kFp4, kD, kExpert>;
  static const bool attr_set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return true;
  }();
  (void)attr_set;
  StreamArgs run = sa;
  int per_sm = 0;
  const int threads = 32 * sa.plan.warps;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  per_sm = std::min(per_sm, StreamBlocksPerSm());
  run.plan.grid = std::max<int>(1, std::min<int64_t>(run.plan.grid, int64_t{SmCount()} * per_sm));
  if (StreamGridCap() > 0) run.plan.grid = std::min(run.plan.grid, StreamGridCap());
  LaunchKernel(kernel, dim3(static_cast<unsigned>(run.plan.grid)), dim3(threads), smem, stream,
               run);
  CUDA_CHECK_LAUNCH();
  stream_launches.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int64_t QLinearStreamLaunches() { return stream_launches.load(std::memory_order_relaxed); }

bool QLinearStreamEnabled() { return EnvInt("DSINFER_QLINEAR_STREAM", 0) != 0; }

namespace {
// The rule for rows quantized in the kernel: staged in shared memory up to kStageXBytes.
bool StagedRowsFit(int64_t x_rows, int64_t width) {
  return x_rows > 0 &&
         x_rows * (qstream::AlignUp(width, 8) * 2 + (width + kQb - 1) / kQb * 4) <= kStageXBytes;
}
}  // namespace

bool ExpertRowsQuantizedInKernel(int64_t x_rows, int64_t k, int64_t total_pairs) {
  return QLinearStreamEnabled() && total_pairs <= 8 * kMaxTokens && k % 64 == 0 &&
         StagedRowsFit(x_rows, k);
}

bool TryLaunchQLinearStream(const QLinearArgs& a, bool fp4, bool dual, int slots, int64_t x_rows,
                            int64_t width, StreamHandle stream) {
  const bool expert = slots > 0;
  if (!QLinearStreamEnabled() || a.n <= 0) return false;
  // One token tile: dense up to 8 rows; experts when the step has few pairs (slots may then
  // still hold more than 8 tokens: the kernel runs their further tiles as further units).
  if (!expert && a.m > kMaxTokens) return false;
  if (expert && x_rows * a.x_row_div > 8 * kMaxTokens) return false;
  const int kd = dual ? 2 : 1;
  const int kp = fp4 ? (dual ? QCfg<true, 2>::kP : QCfg<true, 1>::kP)
                     : (dual ? QCfg<false, 2>::kP : QCfg<false, 1>::kP);
  const int ks = 64 * kp;
  const int cp = fp4 ? (dual ? kChunkPairs<true, 2> : kChunkPairs<true, 1>)
                     : (dual ? kChunkPairs<false, 2> : kChunkPairs<false, 1>);
  const int64_t pb = fp4 ? 512 : 1024;
  // The bulk copies need 16-byte aligned sources: dense weights and scales are checked here;
  // expert tables must hold 16-byte aligned pointers (each tensor its own allocation).
  for (int d = 0; d < kd && !expert; ++d) {
    if ((reinterpret_cast<uintptr_t>(a.w[d]) & 15) != 0) return false;
    if (fp4 && (reinterpret_cast<uintptr_t>(a.s[d]) & 15) != 0) return false;
  }
  StreamArgs sa;
  sa.a = a;
  sa.slots = slots;
  sa.tiles_n = (a.n + 15) / 16;
  if (a.xq == nullptr) {
    sa.rows_x = static_cast<int>(x_rows);
    sa.width = width;
    sa.ldqs = static_cast<int>(qstream::AlignUp(width, 8));
    sa.nblk = static_cast<int>((width + kQb - 1) / kQb);
    if (!StagedRowsFit(x_rows, width)) return false;
    if ((reinterpret_cast<uintptr_t>(a.x) & 15) != 0 || a.ldx % 4 != 0) return false;
  }
  qstream::PlanInput in;
  in.slices = static_cast<int>((a.k + ks - 1) / ks);
  in.slice_pairs = kp;
  in.last_pairs = static_cast<int>((a.k - static_cast<int64_t>(in.slices - 1) * ks) / 64);
  in.chunk_pairs = cp;
  in.stage_bytes = kd * cp * pb + (fp4 ? kd * cp * 32 : 0);
  in.warps = StreamWarps();
  const int items = qstream::UnitsPerRound(in.slices, in.warps) * in.slices;
  const int64_t staged = int64_t{sa.rows_x} * (sa.ldqs * 2 + sa.nblk * 4);
  const qstream::Layout fixed = qstream::MakeLayout(staged, items, kd, in.warps, 0, 0);
  in.ring_budget = kBlockBudget - fixed.ring_off;
  if (const int forced = StreamStagesOverride(); forced > 0)
    in.min_stages = in.max_stages = forced;  // A/B sweeps; checked against the limit below
  qstream::Plan pl = qstream::MakePlan(in);
  const qstream::Layout lay =
      qstream::MakeLayout(staged, items, kd, pl.warps, pl.stages, in.stage_bytes);
  if (lay.bytes > kMaxSmem) return false;
  sa.red_off = static_cast<uint32_t>(lay.red_off);
  sa.ring_off = static_cast<uint32_t>(lay.ring_off);
  sa.bar_off = static_cast<uint32_t>(lay.bar_off);
  sa.stage_bytes = static_cast<uint32_t>(in.stage_bytes);
  const size_t smem = static_cast<size_t>(lay.bytes);
  const int64_t max_units = sa.tiles_n * std::max(slots, 1);
  pl.grid = static_cast<int>(std::min<int64_t>(
      (max_units + pl.units_per_round - 1) / pl.units_per_round, int64_t{1} << 30));
  sa.plan = pl;
  auto go = [&](auto fp4_c, auto dual_c, auto expert_c) {
    LaunchStream<decltype(fp4_c)::value, decltype(dual_c)::value ? 2 : 1,
                 decltype(expert_c)::value>(sa, smem, stream);
  };
  WithQLinearKinds(fp4, dual, expert, go);
  return true;
}

}  // namespace dsinfer::backend::cuda
