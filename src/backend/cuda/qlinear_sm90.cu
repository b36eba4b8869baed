// FP8 and FP4 linear layers on the tensor cores, with the official numerics of qlinear_core.cuh
// (spec §2.12).
//
// Work split. A block owns 16 weight rows (one mma tile) and all of k; its warps own consecutive
// k slices of KS columns (KS = 64 x pairs per warp: a function of format and dual only, never of
// m), keep their slice of the 16 rows in registers (loaded before the grid-dependency wait for
// dense weights), and run every token tile of 8 x NT activation rows against it. The warps' partial
// sums are added in slice order through shared memory. So each output element is the same sequence
// of fp32 operations whatever m, the token tile or the grid: batch invariant, prefill equals
// decode.
//
// Activations come quantized either from a pre-pass (LaunchActQuant into the caller's scratch, for
// many rows) or quantized by each warp for its slice into shared memory (few rows: no extra
// launch). Both use QuantBlock, so both give the same bits.
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

using namespace qcore;

constexpr int kMaxWarps = 16;
constexpr int kInKernelMaxTile = 16;  // token tiles up to this many rows quantize in the kernel
constexpr int kExpertWarps = 4;       // routed experts' warps per block (DecodeWarps)
constexpr int kRowWarps = 4;          // QExpertRowsKernel: 16-row tiles (warps) per block

__global__ void __launch_bounds__(256) ActQuantKernel(ActQuantParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t nblk = (p.k + kQb - 1) / kQb;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (item >= p.rows * nblk) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = item / nblk, b = item % nblk, col = b * kQb + 4 * lane;
  float s;
  const uint2 q = QuantBlock(LoadX4(p.x + r * p.ldx + col, col < p.k), &s);
  if (col < p.k) {
    uint16_t* row = p.q + r * p.ldq;
    if (p.order == QOrder::kNatural) {
      *reinterpret_cast<uint2*>(row + col) = q;
    } else {  // the two f16x2 words to their staged places in the 64-column pair
      const bool fp4 = p.order == QOrder::kWgFp4;
      const int64_t base = col & ~int64_t{63};
      const int c = static_cast<int>(col & 63);
      *reinterpret_cast<uint32_t*>(row + base + StagedPos(fp4, c)) = q.x;
      *reinterpret_cast<uint32_t*>(row + base + StagedPos(fp4, c + 2)) = q.y;
    }
  }
  if (lane == 0) p.s[p.ld_t > 0 ? b * p.ld_t + r : r * p.lds + b] = s;
}

// One thread per (row, 64-column pair): the pair's 32 f16x2 words into their staged places.
template <bool kFp4>
__global__ void __launch_bounds__(256)
    QRestageKernel(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t pairs, int64_t ld) {
  PdlTrigger();
  PdlWait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * pairs) return;
  const int64_t off = (i / pairs) * ld + (i % pairs) * 64;
  uint32_t in[32], out[32];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + off + 8 * c);
    in[4 * c] = v.x;
    in[4 * c + 1] = v.y;
    in[4 * c + 2] = v.z;
    in[4 * c + 3] = v.w;
  }
#pragma unroll
  for (int u = 0; u < 32; ++u) out[StagedPos(kFp4, 2 * u) / 2] = in[u];
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    *reinterpret_cast<uint4*>(dst + off + 8 * c) =
        make_uint4(out[4 * c], out[4 * c + 1], out[4 * c + 2], out[4 * c + 3]);
  }
}

// One slice's weight registers: A fragments and the row scales.
template <bool kFp4, int kD>
struct WSlice {
  uint4 a[kD][QCfg<kFp4, kD>::kP * QCfg<kFp4, kD>::kAw];
  float swf[kD][QCfg<kFp4, kD>::kP];     // FP8: the pair's block scale
  uint32_t swb[kD][QCfg<kFp4, kD>::kP];  // FP4: scale bytes (row g step 0, step 1, row g+8 step 0,
                                         // step 1)
};

// kPf: 0 none, 1 the half-slice prefetch below (one-token-tile dense launches only). The one-tile
// FP4 expert kernels run 4-warp blocks bounded in residency (ptxas): the w1+w3 pair 5 blocks per
// SM (unbounded ptxas gives it 120 registers, 4 blocks) and w2 6. These launches take at most
// kExpertWarps warps (LaunchQLinear).
template <bool kFp4, int kNT, int kD, bool kExpert>
constexpr int kExpertMinBlocks = !(kFp4 && kExpert && kNT == 1) ? 0 : (kD == 2 ? 5 : 6);

template <bool kFp4, int kNT, int kD, bool kExpert, int kPf>
__global__ void __launch_bounds__(kExpertMinBlocks<kFp4, kNT, kD, kExpert> > 0 ? 128 : 512,
                                  kExpertMinBlocks<kFp4, kNT, kD, kExpert>)
    QLinearKernel(QLinearArgs p) {
  using C = QCfg<kFp4, kD>;
  constexpr int kP = C::kP, kKs = C::kKs, kTile = 8 * kNT;
  PdlTrigger();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int nwarps = blockDim.x / 32;
  const int nslices = static_cast<int>((p.k + kKs - 1) / kKs);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t goff = p.group_rows > 0 ? (row0 / p.group_rows) * p.group_stride : 0;
  auto slice_pairs = [&](int sl) {
    const int64_t rest = p.k - static_cast<int64_t>(sl) * kKs;
    return static_cast<int>((rest > kKs ? kKs : rest) / 64);
  };

  const uint8_t* W[kD];
  const void* SW[kD];
  int64_t begin = 0, count = p.m;
  WSlice<kFp4, kD> cur;
  // The lane's bytes of the block's row tile in each matrix (set once W/SW are known): slice sl
  // is a constant stride from them. FP4: the tile's pairs (512 bytes each) and its scale words (32
  // bytes per pair, TileFp4ScalesForMma); FP8: the tile's pairs (1024 bytes each) and the index of
  // the row block's first 128 x 128 scale (pair pp of slice sl lies in column block
  // sl * kKs / 128 + pp / 2).
  constexpr int64_t kPairBytes = kFp4 ? 512 : 1024;
  const uint8_t* wbase[kD];
  const uint8_t* sbase[kD];
  const int64_t sblk = (row0 >> 7) * ((p.k + 127) >> 7);
  auto set_bases = [&] {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      wbase[d] = W[d] + (row0 >> 4) * (p.k >> 6) * kPairBytes + lane * 16;
      sbase[d] =
          static_cast<const uint8_t*>(SW[d]) + (kFp4 ? (row0 >> 4) * (p.k >> 6) * 32 + 4 * g : 0);
    }
  };
  // Pairs [kP0, kP1) of slice sl's weights into buf (the registers those pairs occupy for any
  // slice); a full slice (every slice but a short last one) without the per-pair bounds.
  auto load_pairs = [&](WSlice<kFp4, kD>& buf, int sl, auto p0_c, auto p1_c) {
    constexpr int kP0 = decltype(p0_c)::value, kP1 = decltype(p1_c)::value;
    static_assert(kP0 % 2 == 0, "FP8 scales come per two pairs");
    auto body = [&](auto full_c) {
      constexpr bool kFull = decltype(full_c)::value;
      auto& a = buf.a;
      const int np = slice_pairs(sl);
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        const uint4* wp = reinterpret_cast<const uint4*>(wbase[d] + sl * (kP * kPairBytes));
        if constexpr (kFp4) {
          const uint32_t* sp = reinterpret_cast<const uint32_t*>(sbase[d] + sl * (32 * kP));
#pragma unroll
          for (int pp = kP0; pp < kP1; ++pp) {
            const bool ok = kFull || pp < np;
            a[d][pp] = ok ? LdgWeight(wp + 32 * pp) : make_uint4(0, 0, 0, 0);
            buf.swb[d][pp] = ok ? LdgWeight(sp + 8 * pp) : 0u;
          }
        } else {
          // TileFp8ForMma: pair pp of the tile is 1024 bytes, rows g then rows g+8.
          const int64_t sidx = sblk + sl * (kKs / 128);
#pragma unroll
          for (int pp = kP0; pp < kP1; ++pp) {
            const bool ok = kFull || pp < np;
            a[d][2 * pp] = ok ? LdgWeight(wp + 64 * pp) : make_uint4(0, 0, 0, 0);
            a[d][2 * pp + 1] = ok ? LdgWeight(wp + 64 * pp + 32) : make_uint4(0, 0, 0, 0);
            if (pp % 2 == 0)
              buf.swf[d][pp] = ok ? ScaleAt(SW[d], p.scale_format, sidx + pp / 2) : 0.0f;
            else
              buf.swf[d][pp] = buf.swf[d][pp - 1];
          }
        }
      }
    };
    if (slice_pairs(sl) == kP)
      body(std::true_type{});
    else
      body(std::false_type{});
  };
  // One token tile (decode sizes) only: the prefetch raises the registers of the wider tiles'
  // kernels (batch 32 measured 4% slower with it everywhere; batch 1 and 8 faster).
  constexpr bool kHalfPrefetch = kPf > 0;
  static_assert(kPf == 0 || kNT == 1, "the prefetch is for one token tile");
  using Zero = std::integral_constant<int, 0>;
  using Half = std::integral_constant<int, kP / 2>;
  using All = std::integral_constant<int, kP>;
  auto load_weights = [&](WSlice<kFp4, kD>& buf, int sl) { load_pairs(buf, sl, Zero{}, All{}); };

  if constexpr (!kExpert) {
    W[0] = static_cast<const uint8_t*>(p.w[0]);
    SW[0] = p.s[0];
    if constexpr (kD == 2) {
      W[1] = static_cast<const uint8_t*>(p.w[1]);
      SW[1] = p.s[1];
    }
    // Constant data, before the wait: overlaps the previous kernel.
    set_bases();
    if (warp < nslices) load_weights(cur, warp);
    PdlWait();
  } else {
    PdlWait();
    const int slot = blockIdx.y;  // < max_slots <= experts: the reads below stay in their arrays
    const int nact = *p.num_active, e = p.active[slot];  // independent loads, issued together
    begin = p.offsets[slot];
    count = p.offsets[slot + 1] - begin;
    if (slot >= nact) return;
    W[0] = static_cast<const uint8_t*>(p.ew[0][e]);
    SW[0] = p.es[0][e];
    if constexpr (kD == 2) {
      W[1] = static_cast<const uint8_t*>(p.ew[1][e]);
      SW[1] = p.es[1][e];
    }
    set_bases();
    if (warp < nslices) load_weights(cur, warp);
  }
  auto xrow = [&](int64_t i) -> int64_t {  // activation row of local row i
    if constexpr (kExpert) return p.pairs[begin + i] / p.x_row_div;
    return i;
  };
  auto yrow = [&](int64_t i) -> int64_t {
    if constexpr (kExpert) return p.pairs[begin + i];
    return i;
  };

  // Shared memory: per warp [kTile][kKs] quantized activations (f16) and [kTile][kKs/128] scales
  // of the slice in hand (in-kernel quantization only), then [nslices][kD][kNT][128] partial sums.
  const bool in_kernel = p.xq == nullptr;
  uint16_t* sq = reinterpret_cast<uint16_t*>(smem) + static_cast<size_t>(warp) * kTile * kKs;
  float* ss = reinterpret_cast<float*>(smem + static_cast<size_t>(nwarps) * kTile * kKs * 2) +
              warp * kTile * (kKs / kQb);
  float* red = reinterpret_cast<float*>(
      smem + (in_kernel ? static_cast<size_t>(nwarps) * kTile * (2 * kKs + 4 * (kKs / kQb)) : 0));

  for (int64_t m0 = static_cast<int64_t>(blockIdx.z) * kTile; m0 < count;
       m0 += static_cast<int64_t>(gridDim.z) * kTile) {
    const int ntok = static_cast<int>(count - m0 < kTile ? count - m0 : kTile);
    // Per lane and token tile nt: the row of its B column (token m0 + nt*8 + g) and of its two C
    // columns (tokens m0 + nt*8 + 2t, +1); -1: none. Rows of the in-kernel buffers, else of the
    // pre-quantized input (experts: read from the pair list once per token tile, not per slice).
    int32_t qrow[kNT], srow[kNT][2];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int i = nt * 8 + g, c0 = nt * 8 + 2 * t;
      auto row = [&](int local) -> int32_t {
        if (local >= ntok) return -1;
        return in_kernel ? local : static_cast<int32_t>(xrow(m0 + local));
      };
      qrow[nt] = row(i);
      srow[nt][0] = row(c0);
      srow[nt][1] = row(c0 + 1);
    }
    for (int sl = warp; sl < nslices; sl += nwarps) {
      // cur holds slice sl. The slice after it: the warp's next one, or (a new token tile follows
      // and the warp has several) its first one again; -1: cur stays.
      const bool more_tiles = m0 + static_cast<int64_t>(gridDim.z) * kTile < count;
      const int following =
          sl + nwarps < nslices ? sl + nwarps : (more_tiles && nslices > nwarps ? warp : -1);
      const auto& a = cur.a;
      const auto& swf = cur.swf;
      const auto& swb = cur.swb;
      const int npairs = slice_pairs(sl);
      const int64_t k0 = static_cast<int64_t>(sl) * kKs;
      const int slice = npairs * 64;
      // B sources: the quantized rows of the slice (shared memory or the pre-pass).
      BSrc<kNT> bs;
      int64_t qld, sld;
      if (in_kernel) {
        __syncwarp();                              // the previous slice's reads of sq are done
        const int nblk = (slice + kQb - 1) / kQb;  // <= kKs / 128
        for (int i = 0; i < ntok; ++i) {
          const float* xr = p.x + xrow(m0 + i) * p.ldx + goff + k0 + 4 * lane;
          float4 v[kKs / kQb];
#pragma unroll
          for (int b = 0; b < kKs / kQb; ++b)
            v[b] = LoadX4(xr + b * kQb, b * kQb + 4 * lane < slice);
#pragma unroll
          for (int b = 0; b < kKs / kQb; ++b) {
            if (b >= nblk) break;  // warp-uniform
            float sc;
            const uint2 q = QuantBlock(v[b], &sc);
            if (b * kQb + 4 * lane < slice)
              *reinterpret_cast<uint2*>(sq + i * kKs + b * kQb + 4 * lane) = q;
            if (lane == 0) ss[i * (kKs / kQb) + b] = sc;
          }
        }
        __syncwarp();
        bs.qbase = sq;
        qld = kKs;
        bs.sbase = ss;
        sld = kKs / kQb;
      } else {
        bs.qbase = p.xq + goff + k0;
        qld = p.ldq;
        bs.sbase = p.xs + (goff + k0) / kQb;
        sld = p.lds;
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        bs.qoff[nt] = qrow[nt] >= 0 ? static_cast<int32_t>(qrow[nt] * qld) : -1;
        bs.soff[nt][0] = srow[nt][0] >= 0 ? static_cast<int32_t>(srow[nt][0] * sld) : -1;
        bs.soff[nt][1] = srow[nt][1] >= 0 ? static_cast<int32_t>(srow[nt][1] * sld) : -1;
      }

      float acc[kD][kNT][4], blk[kD][kNT][4];
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[d][nt][i] = blk[d][nt][i] = 0.0f;
      // Dense weights: a full slice (every slice but a short last one) as one straight-line
      // block, no per-pair bound, so the compiler can interleave the pairs' conversions and mma
      // chains (decode batch 1 -0.7%). Not the routed experts: at their 96-register bound it
      // spills (w1 + w3 27.6 -> 30.6 us). The same operations either way.
      auto pairs = [&](auto full_c) {
        constexpr bool kFull = decltype(full_c)::value;
        const int np = kFull ? kP : npairs;
#pragma unroll
        for (int pp = 0; pp < kP; ++pp) {
          if (!kFull && pp >= np) break;  // warp-uniform
          uint4 aw[kD][C::kAw];
          float sf[kD];
          uint32_t sb[kD];
#pragma unroll
          for (int d = 0; d < kD; ++d) {
#pragma unroll
            for (int i = 0; i < C::kAw; ++i) aw[d][i] = a[d][pp * C::kAw + i];
            sf[d] = swf[d][pp];
            sb[d] = swb[d][pp];
          }
          PairMma<kFp4, kNT, kD>(aw, sf, sb, bs, pp, np, acc, blk);
          // The first half's registers are free: the following slice's first half loads while
          // the second half computes (a warp with several slices keeps its loads in flight).
          if (kHalfPrefetch && pp == kP / 2 - 1 && following >= 0)
            load_pairs(cur, following, Zero{}, Half{});
        }
      };
      if (!kExpert && npairs == kP)
        pairs(std::true_type{});
      else
        pairs(std::false_type{});

      // The slices' partial sums, added in slice order.
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
          *reinterpret_cast<float4*>(red + ((sl * kD + d) * kNT + nt) * 128 + lane * 4) =
              make_float4(acc[d][nt][0], acc[d][nt][1], acc[d][nt][2], acc[d][nt][3]);
      if (following >= 0) {
        if (kHalfPrefetch && npairs >= kP / 2)
          load_pairs(cur, following, Half{}, All{});
        else
          load_weights(cur, following);  // a short slice: its loop stopped before the first half
      }
    }
    __syncthreads();
    for (int o = threadIdx.x; o < kNT * 128; o += blockDim.x) {
      const int nt = o / 128, l = (o % 128) / 4, i = o % 4;
      const int64_t row = row0 + l / 4 + 8 * (i / 2);
      const int tok = nt * 8 + 2 * (l % 4) + (i % 2);
      float v[kD];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        v[d] = red[(d * kNT + nt) * 128 + (o % 128)];
        for (int w = 1; w < nslices; ++w) v[d] += red[((w * kD + d) * kNT + nt) * 128 + (o % 128)];
      }
      if (row < p.n && tok < ntok) {
        p.y[yrow(m0 + tok) * p.ldy + row] = kD == 2 ? SwigluF(v[0], v[kD - 1], p.limit) : v[0];
      }
    }
    __syncthreads();
  }
}

// Routed FP4 experts' w2 at decode sizes (up to 8 rows per token tile, the rows quantized by the
// caller): a warp per 16-row tile over all of k, kRowWarps tiles a block, instead of
// QLinearKernel's warps over the k slices of one tile. The block's warps read each activation row
// from L2 once and then from L1 (QLinearKernel reads it once per 16 weight rows: at 3 tokens per
// expert 75% more bytes than w2's weights), there is no block-wide reduction, and each lane
// streams its own bytes of the weight slices through a ring of kStages slices in shared memory
// (cp.async; a lane reads back only what it copied, so no barrier). A slice is computed by
// PairMma from zeroed acc / blk, and the slices' sums are added in slice order, as QLinearKernel
// adds them: the same bits. Measured (docs/perf.md, session 27): w2 6-10% faster over 192 to
// 1,536 pairs (even at 48, slower at 6: hence LaunchQLinear's 64-slot cut); the w1 + w3 pair 5-16%
// slower (it stays on QLinearKernel), and deeper rings slower (fewer resident blocks).
template <int kD, int kStages>
__global__ void __launch_bounds__(kRowWarps * 32) QExpertRowsKernel(QLinearArgs p) {
  using C = QCfg<true, kD>;
  constexpr int kP = C::kP, kKs = C::kKs;
  static_assert(C::kAw == 1, "FP4: one uint4 of A per pair and weight");
  PdlTrigger();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The warp's ring: [stage][d][pair] one uint4 of A per lane, then the same of scale words.
  constexpr int kRing = kStages * kD * kP * 32;
  uint4* ring_a = reinterpret_cast<uint4*>(smem) + warp * kRing + lane;
  uint32_t* ring_s =
      reinterpret_cast<uint32_t*>(reinterpret_cast<uint4*>(smem) + kRowWarps * kRing) +
      warp * kRing + lane;
  PdlWait();
  const int slot = blockIdx.y;  // < max_slots <= experts: the reads below stay in their arrays
  const int nact = *p.num_active, e = p.active[slot];
  const int64_t begin = p.offsets[slot], count = p.offsets[slot + 1] - begin;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kRowWarps + warp) * 16;
  if (slot >= nact || row0 >= p.n) return;  // FP4: n is a multiple of 16
  const int nslices = static_cast<int>((p.k + kKs - 1) / kKs);
  auto slice_pairs = [&](int sl) {
    const int64_t rest = p.k - static_cast<int64_t>(sl) * kKs;
    return static_cast<int>((rest > kKs ? kKs : rest) / 64);
  };
  // The lane's bytes of the tile (TileFp4ForMma: 512 bytes a pair; TileFp4ScalesForMma: 32).
  const uint8_t* wbase[kD];
  const uint8_t* sbase[kD];
#pragma unroll
  for (int d = 0; d < kD; ++d) {
    wbase[d] = static_cast<const uint8_t*>(p.ew[d][e]) + (row0 >> 4) * (p.k >> 6) * 512 + lane * 16;
    sbase[d] = static_cast<const uint8_t*>(p.es[d][e]) + (row0 >> 4) * (p.k >> 6) * 32 + 4 * g;
  }
  // Steps: this block's token tiles (z, z + gridDim.z, ...) x the slices, in that order.
  const int64_t tiles = (count + 7) / 8;
  const int64_t my_tiles =
      blockIdx.z < tiles ? (tiles - blockIdx.z + gridDim.z - 1) / gridDim.z : 0;
  const int64_t steps = my_tiles * nslices;
  auto load = [&](int stage, int sl) {
    const int np = slice_pairs(sl);
#pragma unroll
    for (int d = 0; d < kD; ++d) {
#pragma unroll
      for (int pp = 0; pp < kP; ++pp) {
        const bool ok = pp < np;
        const int64_t pair = static_cast<int64_t>(sl) * kP + (ok ? pp : 0);
        const int i = ((stage * kD + d) * kP + pp) * 32;
        CpAsync16(ring_a + i, wbase[d] + pair * 512, ok);
        CpAsync4(ring_s + i, sbase[d] + pair * 32, ok);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load(s, s % nslices);
    CpAsyncCommit();
  }
  float tot[kD][4];
  int64_t m0 = 0;
  int ntok = 0;
  BSrc<1> bs;
  int32_t qrow = -1, srow[2] = {-1, -1};
  for (int64_t step = 0; step < steps; ++step) {
    CpAsyncWait<kStages - 2>();  // this lane's copies of the step's stage have landed
    {
      // The stage read in the previous step is free (only this lane read it): refill it.
      const int64_t next = step + kStages - 1;
      if (next < steps) load(static_cast<int>(next % kStages), static_cast<int>(next % nslices));
      CpAsyncCommit();
    }
    const int sl = static_cast<int>(step % nslices);
    if (sl == 0) {  // a new token tile
      m0 = (blockIdx.z + (step / nslices) * gridDim.z) * 8;
      ntok = static_cast<int>(count - m0 < 8 ? count - m0 : 8);
      auto row = [&](int local) -> int32_t {
        return local < ntok ? p.pairs[begin + m0 + local] / p.x_row_div : -1;
      };
      qrow = row(g);
      srow[0] = row(2 * t);
      srow[1] = row(2 * t + 1);
    }
    const int npairs = slice_pairs(sl);
    const int64_t k0 = static_cast<int64_t>(sl) * kKs;
    bs.qbase = p.xq + k0;
    bs.sbase = p.xs + k0 / kQb;
    bs.qoff[0] = qrow >= 0 ? static_cast<int32_t>(qrow * p.ldq) : -1;
    bs.soff[0][0] = srow[0] >= 0 ? static_cast<int32_t>(srow[0] * p.lds) : -1;
    bs.soff[0][1] = srow[1] >= 0 ? static_cast<int32_t>(srow[1] * p.lds) : -1;
    const int stage = static_cast<int>(step % kStages);
    float acc[kD][1][4], blk[kD][1][4];
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[d][0][i] = blk[d][0][i] = 0.0f;
#pragma unroll
    for (int pp = 0; pp < kP; ++pp) {
      if (pp >= npairs) break;  // warp-uniform
      uint4 aw[kD][1];
      float sf[kD];
      uint32_t sb[kD];
#pragma unroll
      for (int d = 0; d < kD; ++d) {
        const int i = ((stage * kD + d) * kP + pp) * 32;
        aw[d][0] = ring_a[i];
        sb[d] = ring_s[i];
        sf[d] = 0.0f;
      }
      PairMma<true, 1, kD>(aw, sf, sb, bs, pp, npairs, acc, blk);
    }
    // The slices' sums in slice order (QLinearKernel: red[slice 0], then += each later slice).
#pragma unroll
    for (int d = 0; d < kD; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) tot[d][i] = sl == 0 ? acc[d][0][i] : tot[d][i] + acc[d][0][i];
    if (sl == nslices - 1) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = row0 + g + 8 * (i / 2);
        const int tok = 2 * t + (i % 2);
        if (tok < ntok) {
          p.y[static_cast<int64_t>(p.pairs[begin + m0 + tok]) * p.ldy + row] =
              kD == 2 ? SwigluF(tot[0][i], tot[kD - 1][i], p.limit) : tot[0][i];
        }
      }
    }
  }
}

// w2 (one matrix), a ring of two slices.
void LaunchExpertRows(const QLinearArgs& a, dim3 grid, StreamHandle stream) {
  constexpr int kD = 1, kStages = 2;
  auto kernel = QExpertRowsKernel<kD, kStages>;
  const size_t smem =
      static_cast<size_t>(kRowWarps) * kStages * kD * QCfg<true, kD>::kP * 32 * (16 + 4);
  static const bool attr_set = [&] {
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    return true;
  }();
  (void)attr_set;
  LaunchKernel(kernel, grid, dim3(kRowWarps * 32), smem, stream, a);
  CUDA_CHECK_LAUNCH();
}

// Host twins of QCfg and of the kernel's shared-memory layout: the slice width and the number of
// slices of a shape, and the dynamic shared memory of a launch (the in-kernel quantization
// buffers of `warps` warps, unless the rows come pre-quantized, then the slices' partial sums).
int SliceWidth(bool fp4, bool dual) {
  return fp4 ? (dual ? QCfg<true, 2>::kKs : QCfg<true, 1>::kKs)
             : (dual ? QCfg<false, 2>::kKs : QCfg<false, 1>::kKs);
}
int Slices(int64_t k, bool fp4, bool dual) {
  const int ks = SliceWidth(fp4, dual);
  return static_cast<int>((k + ks - 1) / ks);
}
size_t SmemBytes(int64_t k, bool fp4, bool dual, int nt, int warps, bool prequant) {
  const int ks = SliceWidth(fp4, dual);
  const size_t red = static_cast<size_t>(Slices(k, fp4, dual)) * (dual ? 2 : 1) * nt * 128 * 4;
  return red + (prequant ? 0 : static_cast<size_t>(warps) * 8 * nt * (2 * ks + 4 * (ks / kQb)));
}

// warps: per block (each takes slices warp, warp + warps, ...; never a result).
template <bool kFp4, int kNT, int kD, bool kExpert, int kPf = 0>
void LaunchQ(const QLinearArgs& a, int warps, dim3 grid, StreamHandle stream) {
  auto kernel = QLinearKernel<kFp4, kNT, kD, kExpert, kPf>;
  static const bool attr_set = [&] {
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    return true;
  }();
  (void)attr_set;
  LaunchKernel(kernel, grid, dim3(32 * warps),
               SmemBytes(a.k, kFp4, kD == 2, kNT, warps, a.xq != nullptr), stream, a);
  CUDA_CHECK_LAUNCH();
}

// The kernel instantiation for the runtime (format, pair, experts, token tile); one-token-tile
// dense launches take the half-slice prefetch.
void Dispatch(const QLinearArgs& a, bool fp4, bool dual, bool expert, int nt, int warps, dim3 grid,
              StreamHandle stream) {
  auto go = [&](auto fp4_c, auto dual_c, auto expert_c) {
    constexpr bool kFp4 = decltype(fp4_c)::value, kExpert = decltype(expert_c)::value;
    constexpr int kD = decltype(dual_c)::value ? 2 : 1;
    if constexpr (!kExpert) {
      if (nt == 1) {
        LaunchQ<kFp4, 1, kD, kExpert, 1>(a, warps, grid, stream);
        return;
      }
    }
    if (nt == 1)
      LaunchQ<kFp4, 1, kD, kExpert>(a, warps, grid, stream);
    else if (nt == 2)
      LaunchQ<kFp4, 2, kD, kExpert>(a, warps, grid, stream);
    else
      LaunchQ<kFp4, 4, kD, kExpert>(a, warps, grid, stream);
  };
  auto with = [](bool v, auto fn) {
    if (v)
      fn(std::true_type{});
    else
      fn(std::false_type{});
  };
  with(fp4,
       [&](auto f) { with(dual, [&](auto d) { with(expert, [&](auto e) { go(f, d, e); }); }); });
}

// Warps per block for few rows (each takes slices warp, warp + warps, ...). Measured on an H200
// (bench_gemv and the flash-l8 decode step, docs/perf.md): one dense weight does best with up to
// 8 (one slice per warp up to k = 4096, loaded before the grid-dependency wait; at k = 8192 two
// slices per warp let two blocks share an SM, so a 256-tile matrix is one wave: wo_b 13.7 ->
// 12.9 us), the fused SwiGLU pair with up to 16 (one slice per warp: 8 made the shared expert's
// w1+w3 6.7 -> 8.7 us), routed experts with 4 (their loads wait for the routing anyway; small
// blocks spread the six experts over more SMs). A dense matrix with many row tiles halves its
// warps while it keeps ~12 warps per SM (wq_b: 1, wo_a: 4): each warp then has two slices, the
// second's loads in flight while the first computes (the kernel's half-slice prefetch), and the
// grid is one wave instead of two (one token tile only, as the prefetch). KernelOptions's
// qlinear_warps overrides all, for tests and A/B timing only: every choice gives the same bits.
int DecodeWarps(bool expert, bool dual, int64_t tiles, int slices, bool one_tile) {
  const int forced = GetKernelOptions().qlinear_warps;
  if (forced > 0) return std::min(kMaxWarps, forced);
  if (expert) return kExpertWarps;
  if (dual) return kMaxWarps;
  int w = std::min(slices, 8);
  while (one_tile && w > 1 && tiles * (w / 2) >= int64_t{SmCount()} * 12) w /= 2;
  return w;
}

[[noreturn]] void Unsupported(const char* what, const WeightRef& w) {
  std::fprintf(stderr, "quantized linear: %s (format %d, n=%lld, k=%lld, block=%d)\n", what,
               static_cast<int>(w.format), static_cast<long long>(w.n), static_cast<long long>(w.k),
               w.block);
  std::abort();
}

std::atomic<int64_t> expert_rows_launches{0};

}  // namespace

int64_t QExpertRowsLaunches() { return expert_rows_launches.load(); }

bool QLinearSupports(const WeightRef& w, bool dual, std::string* why) {
  auto fail = [&](const char* s) {
    if (why) *why = s;
    return false;
  };
  if (w.format != WeightFormat::kFp8 && w.format != WeightFormat::kFp4) return fail("not FP8/FP4");
  if (w.k % 64 != 0) return fail("in_features must be a multiple of 64");
  const bool fp4 = w.format == WeightFormat::kFp4;
  if (Slices(w.k, fp4, dual) > 2 * kMaxWarps)
    return fail("in_features too large (at most 8192 for FP4 and fused FP8 pairs, 16384 else)");
  if (fp4 && w.n % 16 != 0) return fail("FP4 out_features must be a multiple of 16");
  if (!fp4 && w.block != 128) return fail("FP8 block size must be 128");
  return true;
}

int64_t Fp8TiledBytes(int64_t n, int64_t k) { return (n + 15) / 16 * 16 * k; }

void TileFp8ForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k) {
  const int64_t pairs = k / 64;
  for (int64_t rt = 0; rt < (n + 15) / 16; ++rt) {
    for (int64_t pr = 0; pr < pairs; ++pr) {
      for (int h = 0; h < 2; ++h) {
        for (int lane = 0; lane < 32; ++lane) {
          const int64_t row = rt * 16 + lane / 4 + 8 * h;
          uint8_t* out = dst + ((rt * pairs + pr) * 2 + h) * 512 + lane * 16;
          if (row < n)
            std::memcpy(out, src + row * k + pr * 64 + 16 * (lane % 4), 16);
          else
            std::memset(out, 0, 16);
        }
      }
    }
  }
}

void TileFp4ScalesForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k) {
  const int64_t groups = k / 32, pairs = k / 64;
  for (int64_t rt = 0; rt < n / 16; ++rt) {
    for (int64_t pr = 0; pr < pairs; ++pr) {
      for (int64_t g = 0; g < 8; ++g) {
        uint8_t* out = dst + ((rt * pairs + pr) * 8 + g) * 4;
        const uint8_t* lo = src + (rt * 16 + g) * groups + 2 * pr;
        const uint8_t* hi = src + (rt * 16 + g + 8) * groups + 2 * pr;
        out[0] = Fp4GpuScaleByte(lo[0]);
        out[1] = Fp4GpuScaleByte(lo[1]);
        out[2] = Fp4GpuScaleByte(hi[0]);
        out[3] = Fp4GpuScaleByte(hi[1]);
      }
    }
  }
}

void TileFp4ForMma(const uint8_t* src, uint8_t* dst, int64_t n, int64_t k) {
  const int64_t row_bytes = k / 2, pairs = k / 64;
  for (int64_t rt = 0; rt < n / 16; ++rt) {
    for (int64_t pr = 0; pr < pairs; ++pr) {
      for (int lane = 0; lane < 32; ++lane) {
        const int64_t g = lane / 4, t = lane % 4;
        // .x/.y: step 0 of rows g and g+8; .z/.w: step 1 (see the kernel's fragment comment).
        const int64_t words[4][2] = {{rt * 16 + g, 8 * pr + t},
                                     {rt * 16 + g + 8, 8 * pr + t},
                                     {rt * 16 + g, 8 * pr + 4 + t},
                                     {rt * 16 + g + 8, 8 * pr + 4 + t}};
        uint8_t* out = dst + ((rt * pairs + pr) * 32 + lane) * 16;
        for (int i = 0; i < 4; ++i) {
          // Columns k0..k7 (low nibble = even column) -> byte b: k_b's sign at bit 7 and its other
          // three bits at 3..1, k_{4+b}'s sign at bit 0 and its other bits at 6..4 (the kernel's
          // Fp4LowToF16Hi / Fp4HighToF16Hi).
          const uint8_t* in = src + words[i][0] * row_bytes + 4 * words[i][1];
          auto nib = [&](int c) { return (in[c / 2] >> (4 * (c % 2))) & 0xf; };
          for (int b = 0; b < 4; ++b) {
            const int lo = nib(b), hi = nib(4 + b);
            out[4 * i + b] = static_cast<uint8_t>(((lo & 8) << 4) | ((lo & 7) << 1) |
                                                  ((hi & 8) >> 3) | ((hi & 7) << 4));
          }
        }
      }
    }
  }
}

int64_t QuantizedLd(int64_t k) { return (k + 15) / 16 * 16; }
int64_t QuantizedScales(int64_t k) { return (k + kQb - 1) / kQb; }

QuantizedRows LaunchActQuantRows(const float* x, int64_t ldx, int64_t rows, int64_t k,
                                 uint16_t* q_buf, float* s_buf, StreamHandle stream) {
  ActQuantParams p;
  p.x = x;
  p.ldx = ldx;
  p.rows = rows;
  p.k = k;
  p.q = q_buf;
  p.ldq = QuantizedLd(k);
  p.s = s_buf;
  p.lds = QuantizedScales(k);
  LaunchActQuant(p, stream);
  QuantizedRows r;
  r.q = q_buf;
  r.ldq = p.ldq;
  r.s = s_buf;
  r.lds = p.lds;
  return r;
}

void LaunchActQuant(const ActQuantParams& p, StreamHandle stream) {
  if (p.rows <= 0 || p.k <= 0) return;
  const int64_t items = p.rows * ((p.k + kQb - 1) / kQb);
  LaunchKernel(ActQuantKernel, dim3(static_cast<unsigned>((items + 7) / 8)), dim3(256), 0, stream,
               p);
  CUDA_CHECK_LAUNCH();
}

QOrder WgOrder(bool fp4) { return fp4 ? QOrder::kWgFp4 : QOrder::kWgFp8; }

void LaunchQRestage(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t width, int64_t ld,
                    QOrder order, StreamHandle stream) {
  const int64_t items = rows * (width / 64);
  if (items <= 0 || order == QOrder::kNatural) return;
  const dim3 grid(static_cast<unsigned>((items + 255) / 256));
  if (order == QOrder::kWgFp4) {
    LaunchKernel(QRestageKernel<true>, grid, dim3(256), 0, stream, src, dst, rows, width / 64, ld);
  } else {
    LaunchKernel(QRestageKernel<false>, grid, dim3(256), 0, stream, src, dst, rows, width / 64, ld);
  }
  CUDA_CHECK_LAUNCH();
}

void LaunchQLinear(QLinearArgs a, const WeightRef& shape, bool dual, int64_t rows_hint, int slots,
                   int64_t x_rows, const ActQuantScratch& scratch, StreamHandle stream) {
  std::string why;
  if (!QLinearSupports(shape, dual, &why)) Unsupported(why.c_str(), shape);
  const bool fp4 = shape.format == WeightFormat::kFp4, expert = slots > 0;
  if (a.group_rows > 0 &&
      (a.group_rows % 16 != 0 || a.group_stride % kQb != 0 || shape.k % kQb != 0)) {
    Unsupported("grouped input needs 16-row groups and 128-column group offsets and widths", shape);
  }
  if (a.xq == nullptr && ((reinterpret_cast<uintptr_t>(a.x) & 15) != 0 || a.ldx % 4 != 0))
    Unsupported("activations must be 16-byte aligned", shape);
  a.n = shape.n;
  a.k = shape.k;
  a.scale_format = shape.scale_format;
  // Token tile: up to 16 rows quantize in the kernel (per warp slice, in shared memory: tile 16 at
  // most, 8 for the widest k); more rows take the act_quant pre-pass into the caller's scratch and
  // tiles of 32. No choice here changes a result.
  const int slices = Slices(shape.k, fp4, dual);
  const int64_t tiles_n = (shape.n + 15) / 16;
  const int64_t width =
      a.group_rows > 0 ? ((shape.n - 1) / a.group_rows) * a.group_stride + shape.k : shape.k;
  const int64_t ldq = (width + 15) / 16 * 16, lds = (width + kQb - 1) / kQb;
  // Many rows: the tiled GEMM (the same bits; weights and activations through shared memory
  // instead of weight-stationary blocks that re-read every activation row once per 16 weight
  // rows). Routed experts from fewer rows per expert: their grid has a block row per expert. On
  // warpgroup MMA (the option) it reads the activations in its staged order: the pre-pass below
  // writes them so, or a caller's rows are copied so into the scratch.
  const KernelOptions& ko = GetKernelOptions();
  const int64_t qgemm_rows = expert ? ko.qgemm_expert_min_rows : ko.qgemm_min_rows;
  const bool tiled = qgemm_rows > 0 && rows_hint >= qgemm_rows;
  // (It addresses the quantized rows by 32-bit offsets.)
  const bool wg = tiled && ko.qgemm_wgmma && QGemmWgSupports(a, fp4, dual, expert) &&
                  x_rows * std::max(a.ldq, ldq) < (int64_t{1} << 31) &&
                  x_rows * std::max(a.lds, lds) < (int64_t{1} << 31);
  int nt, warps;
  if (a.xq != nullptr) {  // the caller quantized the rows: the launch shape of their count
    if (a.xs == nullptr || a.ldq < width || a.lds < (width + kQb - 1) / kQb)
      Unsupported("pre-quantized rows narrower than the input", shape);
    uint16_t* staged = reinterpret_cast<uint16_t*>(scratch.q);
    if (wg && staged != nullptr && staged != a.xq && 2 * x_rows * a.ldq <= scratch.q_bytes &&
        a.ldq % 8 == 0 && (reinterpret_cast<uintptr_t>(a.xq) & 15) == 0) {
      LaunchQRestage(a.xq, staged, x_rows, width, a.ldq, WgOrder(fp4), stream);
      a.xq = staged;
      LaunchQGemmWg(a, fp4, dual, rows_hint, slots, stream);
      return;
    }
    nt = rows_hint <= 8 ? 1 : rows_hint <= kInKernelMaxTile ? 2 : 4;
    // Routed FP4 w2 over many slots at few rows each: a warp per row tile (the same bits).
    if (fp4 && expert && !dual && nt == 1 && !tiled && ko.qexpert_rows_min_slots > 0 &&
        slots >= ko.qexpert_rows_min_slots && a.group_rows == 0 &&
        x_rows * a.ldq < (int64_t{1} << 31) && x_rows * a.lds < (int64_t{1} << 31)) {
      const int64_t tiles = std::max<int64_t>(1, (rows_hint + 7) / 8);
      const dim3 grid(static_cast<unsigned>((tiles_n + kRowWarps - 1) / kRowWarps),
                      static_cast<unsigned>(slots),
                      static_cast<unsigned>(std::min<int64_t>(tiles, 65535)));
      LaunchExpertRows(a, grid, stream);
      ++expert_rows_launches;
      return;
    }
    warps = std::min(slices, rows_hint <= kInKernelMaxTile
                                 ? DecodeWarps(expert, dual, tiles_n, slices, nt == 1)
                                 : kMaxWarps);
  } else if (rows_hint > kInKernelMaxTile && scratch.q != nullptr &&
             2 * x_rows * ldq <= scratch.q_bytes && x_rows * lds <= scratch.s_count) {
    ActQuantParams q;
    q.x = a.x;
    q.ldx = a.ldx;
    q.rows = x_rows;
    q.k = width;
    q.q = reinterpret_cast<uint16_t*>(scratch.q);
    q.ldq = ldq;
    q.s = scratch.s;
    q.lds = lds;
    q.order = wg ? WgOrder(fp4) : QOrder::kNatural;
    a.xq = q.q;
    a.xs = scratch.s;
    a.ldq = ldq;
    a.lds = lds;
    // The dense warp-specialized GEMM reads transposed scales (one bulk copy per tile and pair)
    // when the scratch holds them for whole 128-token tiles; should the driver refuse its tensor
    // map, the scales are written again in their natural order for the other kernel.
    if (const int64_t ld_t = (x_rows + 127) / 128 * 128;
        wg && !expert && !fp4 && ko.qgemm_ws_scales_t && lds * ld_t <= scratch.s_count) {
      QLinearArgs t = a;
      t.lds = ld_t;
      t.xs_t = true;
      ActQuantParams qt = q;
      qt.ld_t = ld_t;
      LaunchActQuant(qt, stream);
      if (TryLaunchQGemmWs(t, fp4, expert, dual, stream)) return;
    }
    LaunchActQuant(q, stream);
    if (wg) {
      LaunchQGemmWg(a, fp4, dual, rows_hint, slots, stream);
      return;
    }
    nt = 4;
    warps = std::min(slices, kMaxWarps);  // one slice per warp up to k = 4096: its weights stay in
                                          // registers for every token tile
  } else {
    nt = rows_hint <= 8 || shape.k > 4096 ? 1 : 2;
    warps = std::min(slices, DecodeWarps(expert, dual, tiles_n, slices, nt == 1));
  }
  if (tiled && QGemmSupports(a, fp4, expert)) {
    LaunchQGemm(a, fp4, dual, rows_hint, slots, stream);
    return;
  }
  while (nt > 1 && SmemBytes(shape.k, fp4, dual, nt, warps, a.xq != nullptr) > 200 * 1024) nt /= 2;
  if (fp4 && expert && nt == 1) warps = std::min(warps, kExpertWarps);  // kExpertMinBlocks' bound
  // The kernel addresses quantized rows by 32-bit offsets (row * ld).
  if (a.xq != nullptr &&
      (x_rows * a.ldq >= (int64_t{1} << 31) || x_rows * a.lds >= (int64_t{1} << 31)))
    Unsupported("too many quantized rows for 32-bit offsets", shape);
  const int64_t bx = tiles_n;
  const int64_t tiles = (std::max<int64_t>(rows_hint, 1) + 8 * nt - 1) / (8 * nt);
  const int64_t blocks = bx * std::max(slots, 1);
  const int64_t bz = std::min<int64_t>(
      {tiles, 65535, std::max<int64_t>(1, (4 * SmCount() + blocks - 1) / blocks)});
  const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>(std::max(slots, 1)),
                  static_cast<unsigned>(bz));
  // One-token-tile dense launches prefetch; routed experts never (measured slower since the FP4
  // word re-coding, docs/perf.md).
  Dispatch(a, fp4, dual, expert, nt, warps, grid, stream);
}

}  // namespace dsinfer::backend::cuda
