// FP8 and FP4 linear layers on the tensor cores, with the official numerics (spec §2.12): the
// activation input is quantized per (row, 128 columns) to e4m3 with a power-of-two scale
// (act_quant, the twin of cpu::ActQuantRow), and every 32-wide k step is one
// mma.sync.m16n8k32 e4m3 x e4m3 -> fp32 (FP4 e2m1 weights are re-coded exactly as e4m3, value
// times 2^-6) whose result is scaled by s_w * s_x and added to an fp32 accumulator.
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
//
// Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit inputs; g = lane / 4, t = lane % 4):
//   A reg0/reg2: row g, k 4t..4t+3 / 16+4t..; reg1/reg3: row g+8, same k.  B reg0/reg1: column
//   (token) g, the same k as A reg0/reg2.  C: c0,c1 row g, tokens 2t, 2t+1; c2,c3 row g+8.
// A k "pair" is 64 columns (two mma steps). FP8: lane t takes bytes [16t, 16t+16) of the pair from
// rows g and g+8 (its first 8 bytes feed step 0, the last 8 step 1) and the same 16 bytes of the
// quantized activation. FP4 (pre-tiled by TileFp4ForMma): lane t takes the 32-bit word t of each
// step's 16-byte row chunk (the step's 32 columns = one FP4 scale group); its even nibbles become
// reg0, the odd nibbles reg2, and the activation bytes are de-interleaved to match.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/cuda/check.cuh"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kQb = 128;  // act_quant block
constexpr int kMaxWarps = 16;
constexpr int kInKernelMaxTile = 16;  // token tiles up to this many rows quantize in the kernel

// One act_quant block held 4 values per lane (lane l: columns 4l..4l+3, missing columns as 0):
// the lane's 4 quantized values as f16 (e4m3 values are exact in f16: the tensor cores take them
// as f16, spec §2.12's e4m3 products are exact either way), and the block's scale in *scale.
__device__ __forceinline__ uint2 QuantBlock(float4 v, float* scale) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const uint32_t bits = __float_as_uint(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
  const int e = static_cast<int>((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) != 0 ? 1 : 0);
  const float inv = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
  *scale = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
  const __nv_fp8x2_storage_t lo =
      __nv_cvt_float2_to_fp8x2(make_float2(v.x * inv, v.y * inv), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t hi =
      __nv_cvt_float2_to_fp8x2(make_float2(v.z * inv, v.w * inv), __NV_SATFINITE, __NV_E4M3);
  const __half2_raw hl = __nv_cvt_fp8x2_to_halfraw2(lo, __NV_E4M3),
                    hh = __nv_cvt_fp8x2_to_halfraw2(hi, __NV_E4M3);
  return make_uint2(static_cast<uint32_t>(hl.x) | (static_cast<uint32_t>(hl.y) << 16),
                    static_cast<uint32_t>(hh.x) | (static_cast<uint32_t>(hh.y) << 16));
}

__device__ __forceinline__ float4 LoadX4(const float* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
}

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
  if (col < p.k) *reinterpret_cast<uint2*>(p.q + r * p.ldq + col) = q;
  if (lane == 0) p.s[r * p.lds + b] = s;
}

// Two e4m3 bytes (low 16 bits of v) -> f16x2, exact (the hardware conversion).
__device__ __forceinline__ uint32_t E4m3x2ToF16x2(uint32_t v) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// e2m1 nibbles -> the high byte of f16 (value * 2^-14, exact): sign to bit 7, the 3 exponent and
// mantissa bits to 3..1. Even nibbles (0, 2, 4, 6) and odd nibbles, one byte each; integer ops
// only.
__device__ __forceinline__ uint32_t Fp4EvenToF16Hi(uint32_t v) {
  return ((v << 4) & 0x80808080u) | ((v << 1) & 0x0e0e0e0eu);
}
__device__ __forceinline__ uint32_t Fp4OddToF16Hi(uint32_t v) {
  return (v & 0x80808080u) | ((v >> 3) & 0x0e0e0e0eu);
}
// f16x2 of two of those bytes: sel 0x1404 takes bytes 0 and 1, 0x3424 bytes 2 and 3.
__device__ __forceinline__ uint32_t HiBytesToF16x2(uint32_t v, uint32_t sel) {
  return __byte_perm(v, 0u, sel);
}

// d = A (16 x 16 f16, row) * B (16 x 8 f16, col) + c, fp32 accumulate (mma.sync on sm_90: FP8
// mma.sync is emulated there, so the kernel feeds f16 it converted itself).
__device__ __forceinline__ void Hmma(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                     float (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The ue8m0 scale byte b (2^(b - 127); b = 0: 2^-127) times 2^14 (the FP4 weights enter the mma
// as f16 value * 2^-14), in three integer ops: 2^(b - 113) is a normal float for b <= 240 (b = 0
// included), and b >= 241 overflows to infinity either way.
__device__ __forceinline__ float E8m0TimesF16Unit(uint32_t b) {
  return __uint_as_float((min(b, 241u) + 14u) << 23);
}

template <bool kFp4, int kD>
struct QCfg {
  // k pairs per warp slice: 8 (512 columns) for one FP8 weight, else 4. Measured (bench_gemv,
  // H200): shorter FP8 slices with the next one double-buffered in registers were no faster.
  static constexpr int kP = (kD == 2 || kFp4) ? 4 : 8;
  static constexpr int kKs = 64 * kP;       // slice width
  static constexpr int kAw = kFp4 ? 1 : 2;  // uint4 of A per pair and weight
};

// One slice's weight registers: A fragments and the row scales.
template <bool kFp4, int kD>
struct WSlice {
  uint4 a[kD][QCfg<kFp4, kD>::kP * QCfg<kFp4, kD>::kAw];
  float swf[kD][QCfg<kFp4, kD>::kP];     // FP8: the pair's block scale
  uint32_t swb[kD][QCfg<kFp4, kD>::kP];  // FP4: scale bytes (row g step 0, step 1, row g+8 step 0,
                                         // step 1)
};

template <bool kFp4, int kNT, int kD, bool kExpert>
__global__ void __launch_bounds__(512) QLinearKernel(QLinearArgs p) {
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
  // The lane's weight bytes of slice sl into buf (all address arithmetic once per slice: the
  // pairs are constant offsets from one base). FP8 scale blocks are 128 x 128: pair pp lies in
  // column block sl * kKs / 128 + pp / 2.
  auto load_weights = [&](WSlice<kFp4, kD>& buf, int sl) {
    auto& a = buf.a;
    auto& swf = buf.swf;
    auto& swb = buf.swb;
    const int np = slice_pairs(sl);
    const int64_t k0 = static_cast<int64_t>(sl) * kKs;
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      if constexpr (kFp4) {
        const uint4* wp = reinterpret_cast<const uint4*>(
            W[d] + (((row0 >> 4) * (p.k >> 6) + (k0 >> 6)) * 32 + lane) * 16);
        const uint8_t* sp =
            static_cast<const uint8_t*>(SW[d]) + (row0 + g) * (p.k >> 5) + (k0 >> 5);
        const int64_t s8 = 8 * (p.k >> 5);
#pragma unroll
        for (int pp = 0; pp < kP; ++pp) {
          const bool ok = pp < np;
          a[d][pp] = ok ? __ldg(wp + 32 * pp) : make_uint4(0, 0, 0, 0);
          const uint32_t lo = ok ? __ldg(reinterpret_cast<const uint16_t*>(sp + 2 * pp)) : 0u;
          const uint32_t hi = ok ? __ldg(reinterpret_cast<const uint16_t*>(sp + s8 + 2 * pp)) : 0u;
          swb[d][pp] = lo | (hi << 16);
        }
      } else {
        const bool ok0 = row0 + g < p.n, ok1 = row0 + g + 8 < p.n;
        const uint8_t* base = W[d] + (row0 + g) * p.k + k0 + 16 * t;
        const uint4* w0 = reinterpret_cast<const uint4*>(base);
        const uint4* w1 = reinterpret_cast<const uint4*>(base + 8 * p.k);
        const int64_t sidx = (row0 >> 7) * ((p.k + 127) >> 7) + (k0 >> 7);
#pragma unroll
        for (int pp = 0; pp < kP; ++pp) {
          const bool ok = pp < np;
          a[d][2 * pp] = ok && ok0 ? __ldg(w0 + 4 * pp) : make_uint4(0, 0, 0, 0);
          a[d][2 * pp + 1] = ok && ok1 ? __ldg(w1 + 4 * pp) : make_uint4(0, 0, 0, 0);
          if (pp % 2 == 0)
            swf[d][pp] = ok ? ScaleAt(SW[d], p.scale_format, sidx + pp / 2) : 0.0f;
          else
            swf[d][pp] = swf[d][pp - 1];
        }
      }
    }
  };

  if constexpr (!kExpert) {
    W[0] = static_cast<const uint8_t*>(p.w[0]);
    SW[0] = p.s[0];
    if constexpr (kD == 2) {
      W[1] = static_cast<const uint8_t*>(p.w[1]);
      SW[1] = p.s[1];
    }
    // Constant data, before the wait: overlaps the previous kernel.
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
      // B sources: the quantized rows (shared memory or the pre-pass) and, per lane, the row of its
      // B column (token m0 + nt*8 + g) and of its two C columns (tokens m0 + nt*8 + 2t, +1); -1:
      // none.
      const uint16_t* qbase;
      const float* sbase;
      int64_t qld, sld;
      int32_t qrow[kNT], srow[kNT][2];
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
        qbase = sq;
        qld = kKs;
        sbase = ss;
        sld = kKs / kQb;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int i = nt * 8 + g, c0 = nt * 8 + 2 * t;
          qrow[nt] = i < ntok ? i : -1;
          srow[nt][0] = c0 < ntok ? c0 : -1;
          srow[nt][1] = c0 + 1 < ntok ? c0 + 1 : -1;
        }
      } else {
        qbase = p.xq + goff + k0;
        qld = p.ldq;
        sbase = p.xs + (goff + k0) / kQb;
        sld = p.lds;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int i = nt * 8 + g, c0 = nt * 8 + 2 * t;
          qrow[nt] = i < ntok ? static_cast<int32_t>(xrow(m0 + i)) : -1;
          srow[nt][0] = c0 < ntok ? static_cast<int32_t>(xrow(m0 + c0)) : -1;
          srow[nt][1] = c0 + 1 < ntok ? static_cast<int32_t>(xrow(m0 + c0 + 1)) : -1;
        }
      }

      float acc[kD][kNT][4], blk[kD][kNT][4];
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[d][nt][i] = blk[d][nt][i] = 0.0f;
      // The activation scale of token column c (0/1) of the lane in token tile nt, for pair pp.
      auto act_scale = [&](int nt, int c, int pp) {
        return srow[nt][c] >= 0 ? sbase[static_cast<int64_t>(srow[nt][c]) * sld + pp / 2] : 0.0f;
      };

#pragma unroll
      for (int pp = 0; pp < kP; ++pp) {
        if (pp >= npairs) break;  // warp-uniform
        // The pair's A fragments as f16, four m16n8k16 steps (q), once for all token tiles.
        // FP8: step q takes the 4 bytes of word q of the lane's 16 (rows g and g+8), k 16t + 4q +
        // 0..3. FP4: step q = 2j + h takes nibbles 4h..4h+3 of word j (k 32j + 8t + 4h + 0..3):
        // reg0 the even ones, reg2 the odd ones. sg/sh: weight scales of rows g and g+8 per
        // 32-column step j.
        uint32_t af[kD][4][4];
        float sg[kD][2], sh[kD][2];
#pragma unroll
        for (int d = 0; d < kD; ++d) {
          if constexpr (kFp4) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const uint32_t wg = j == 0 ? a[d][pp].x : a[d][pp].z,
                             wh = j == 0 ? a[d][pp].y : a[d][pp].w;
              const uint32_t eg = Fp4EvenToF16Hi(wg), og = Fp4OddToF16Hi(wg);
              const uint32_t eh = Fp4EvenToF16Hi(wh), oh = Fp4OddToF16Hi(wh);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const uint32_t sel = h == 0 ? 0x1404u : 0x3424u;
                af[d][2 * j + h][0] = HiBytesToF16x2(eg, sel);
                af[d][2 * j + h][1] = HiBytesToF16x2(eh, sel);
                af[d][2 * j + h][2] = HiBytesToF16x2(og, sel);
                af[d][2 * j + h][3] = HiBytesToF16x2(oh, sel);
              }
              sg[d][j] = E8m0TimesF16Unit((swb[d][pp] >> (8 * j)) & 0xff);
              sh[d][j] = E8m0TimesF16Unit((swb[d][pp] >> (16 + 8 * j)) & 0xff);
            }
          } else {
            const uint4 lo = a[d][2 * pp], hi = a[d][2 * pp + 1];
            const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              af[d][q][0] = E4m3x2ToF16x2(wl[q]);
              af[d][q][1] = E4m3x2ToF16x2(wh[q]);
              af[d][q][2] = E4m3x2ToF16x2(wl[q] >> 16);
              af[d][q][3] = E4m3x2ToF16x2(wh[q] >> 16);
            }
            sg[d][0] = sh[d][0] = sg[d][1] = sh[d][1] = swf[d][pp];
          }
        }
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          uint32_t b[4][2];  // [step q][reg]: the lane's activations at its A values' k
          const uint16_t* bp = qbase + static_cast<int64_t>(qrow[nt]) * qld + 64 * pp;
          if constexpr (kFp4) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              uint4 v = make_uint4(0, 0, 0, 0);
              if (qrow[nt] >= 0) v = *reinterpret_cast<const uint4*>(bp + 32 * j + 8 * t);
              b[2 * j][0] = __byte_perm(v.x, v.y, 0x5410);
              b[2 * j][1] = __byte_perm(v.x, v.y, 0x7632);
              b[2 * j + 1][0] = __byte_perm(v.z, v.w, 0x5410);
              b[2 * j + 1][1] = __byte_perm(v.z, v.w, 0x7632);
            }
          } else {
            uint4 v0 = make_uint4(0, 0, 0, 0), v1 = make_uint4(0, 0, 0, 0);
            if (qrow[nt] >= 0) {
              v0 = *reinterpret_cast<const uint4*>(bp + 16 * t);
              v1 = *reinterpret_cast<const uint4*>(bp + 16 * t + 8);
            }
            b[0][0] = v0.x;
            b[0][1] = v0.y;
            b[1][0] = v0.z;
            b[1][1] = v0.w;
            b[2][0] = v1.x;
            b[2][1] = v1.y;
            b[3][0] = v1.z;
            b[3][1] = v1.w;
          }
#pragma unroll
          for (int d = 0; d < kD; ++d) {
            // FP8: the pair's 4 steps chained in fp32, scaled by s_w * s_x (one block scale).
            // FP4: 2 steps per scale group, scaled by the rows' s_w into the block sum (blk),
            // which meets s_x once per 128-column block (below).
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              if (!kFp4 && j == 1) break;
              float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
              for (int q = kFp4 ? 2 * j : 0; q < (kFp4 ? 2 * j + 2 : 4); ++q)
                Hmma(af[d][q], b[q][0], b[q][1], r);
              if constexpr (kFp4) {
                blk[d][nt][0] = fmaf(r[0], sg[d][j], blk[d][nt][0]);
                blk[d][nt][1] = fmaf(r[1], sg[d][j], blk[d][nt][1]);
                blk[d][nt][2] = fmaf(r[2], sh[d][j], blk[d][nt][2]);
                blk[d][nt][3] = fmaf(r[3], sh[d][j], blk[d][nt][3]);
              } else {
                const float sx0 = act_scale(nt, 0, pp), sx1 = act_scale(nt, 1, pp);
                acc[d][nt][0] = fmaf(r[0], sg[d][j] * sx0, acc[d][nt][0]);
                acc[d][nt][1] = fmaf(r[1], sg[d][j] * sx1, acc[d][nt][1]);
                acc[d][nt][2] = fmaf(r[2], sh[d][j] * sx0, acc[d][nt][2]);
                acc[d][nt][3] = fmaf(r[3], sh[d][j] * sx1, acc[d][nt][3]);
              }
            }
          }
        }
        if constexpr (kFp4) {
          if (pp % 2 == 1 || pp + 1 == npairs) {  // the 128-column block is complete
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              const float sx0 = act_scale(nt, 0, pp), sx1 = act_scale(nt, 1, pp);
#pragma unroll
              for (int d = 0; d < kD; ++d) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                  acc[d][nt][i] = fmaf(blk[d][nt][i], i % 2 ? sx1 : sx0, acc[d][nt][i]);
                  blk[d][nt][i] = 0.0f;
                }
              }
            }
          }
        }
      }

      // The slices' partial sums, added in slice order.
#pragma unroll
      for (int d = 0; d < kD; ++d)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
          *reinterpret_cast<float4*>(red + ((sl * kD + d) * kNT + nt) * 128 + lane * 4) =
              make_float4(acc[d][nt][0], acc[d][nt][1], acc[d][nt][2], acc[d][nt][3]);
      if (following >= 0) load_weights(cur, following);
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
template <bool kFp4, int kNT, int kD, bool kExpert>
void LaunchQ(const QLinearArgs& a, int warps, dim3 grid, StreamHandle stream) {
  auto kernel = QLinearKernel<kFp4, kNT, kD, kExpert>;
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

// The kernel instantiation for the runtime (format, pair, experts, token tile).
void Dispatch(const QLinearArgs& a, bool fp4, bool dual, bool expert, int nt, int warps, dim3 grid,
              StreamHandle stream) {
  auto go = [&](auto fp4_c, auto dual_c, auto expert_c) {
    constexpr bool kFp4 = decltype(fp4_c)::value, kExpert = decltype(expert_c)::value;
    constexpr int kD = decltype(dual_c)::value ? 2 : 1;
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
// (bench_gemv and the flash-l8 decode step, docs/perf.md): dense weights do best with one slice
// per warp (up to 16 warps: all of a row tile's bytes in flight at once, loaded before the
// grid-dependency wait), routed experts with 4 (their loads wait for the routing anyway; small
// blocks spread the six experts over more SMs). DSINFER_QLINEAR_WARPS=n overrides both, for A/B
// timing only: every choice gives the same bits.
int DecodeWarps(bool expert) {
  static const int forced = [] {
    const char* v = std::getenv("DSINFER_QLINEAR_WARPS");
    return v ? std::max(1, std::min(kMaxWarps, std::atoi(v))) : 0;
  }();
  return forced > 0 ? forced : (expert ? 4 : kMaxWarps);
}

[[noreturn]] void Unsupported(const char* what, const WeightRef& w) {
  std::fprintf(stderr, "quantized linear: %s (format %d, n=%lld, k=%lld, block=%d)\n", what,
               static_cast<int>(w.format), static_cast<long long>(w.n), static_cast<long long>(w.k),
               w.block);
  std::abort();
}

}  // namespace

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
        for (int i = 0; i < 4; ++i)
          std::memcpy(out + 4 * i, src + words[i][0] * row_bytes + 4 * words[i][1], 4);
      }
    }
  }
}

void LaunchActQuant(const ActQuantParams& p, StreamHandle stream) {
  if (p.rows <= 0 || p.k <= 0) return;
  const int64_t items = p.rows * ((p.k + kQb - 1) / kQb);
  LaunchKernel(ActQuantKernel, dim3(static_cast<unsigned>((items + 7) / 8)), dim3(256), 0, stream,
               p);
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
  if ((reinterpret_cast<uintptr_t>(a.x) & 15) != 0 || a.ldx % 4 != 0)
    Unsupported("activations must be 16-byte aligned", shape);
  a.n = shape.n;
  a.k = shape.k;
  a.scale_format = shape.scale_format;
  // Token tile: up to 16 rows quantize in the kernel (per warp slice, in shared memory: tile 16 at
  // most, 8 for the widest k); more rows take the act_quant pre-pass into the caller's scratch and
  // tiles of 32. No choice here changes a result.
  const int slices = Slices(shape.k, fp4, dual);
  const int64_t width =
      a.group_rows > 0 ? ((shape.n - 1) / a.group_rows) * a.group_stride + shape.k : shape.k;
  const int64_t ldq = (width + 15) / 16 * 16, lds = (width + kQb - 1) / kQb;
  int nt, warps;
  if (rows_hint > kInKernelMaxTile && scratch.q != nullptr && 2 * x_rows * ldq <= scratch.q_bytes &&
      x_rows * lds <= scratch.s_count) {
    ActQuantParams q;
    q.x = a.x;
    q.ldx = a.ldx;
    q.rows = x_rows;
    q.k = width;
    q.q = reinterpret_cast<uint16_t*>(scratch.q);
    q.ldq = ldq;
    q.s = scratch.s;
    q.lds = lds;
    LaunchActQuant(q, stream);
    a.xq = q.q;
    a.xs = scratch.s;
    a.ldq = ldq;
    a.lds = lds;
    nt = 4;
    warps = std::min(slices, kMaxWarps);  // one slice per warp up to k = 4096: its weights stay in
                                          // registers for every token tile
  } else {
    a.xq = nullptr;
    a.xs = nullptr;
    nt = rows_hint <= 8 || shape.k > 4096 ? 1 : 2;
    warps = std::min(slices, DecodeWarps(expert));
  }
  while (nt > 1 && SmemBytes(shape.k, fp4, dual, nt, warps, a.xq != nullptr) > 200 * 1024) nt /= 2;
  const int64_t bx = (shape.n + 15) / 16;
  const int64_t tiles = (std::max<int64_t>(rows_hint, 1) + 8 * nt - 1) / (8 * nt);
  const int64_t blocks = bx * std::max(slots, 1);
  const int64_t bz = std::min<int64_t>(
      {tiles, 65535, std::max<int64_t>(1, (4 * SmCount() + blocks - 1) / blocks)});
  const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>(std::max(slots, 1)),
                  static_cast<unsigned>(bz));
  Dispatch(a, fp4, dual, expert, nt, warps, grid, stream);
}

}  // namespace dsinfer::backend::cuda
