// The arithmetic core of the FP8 and FP4 linear kernel (qlinear_sm90.cu; internal to
// backend/cuda), on the tensor cores with the official numerics (spec §2.12): the
// activation input is quantized per (row, 128 columns) to e4m3 with a power-of-two scale
// (act_quant, the twin of cpu::ActQuantRow), and every 32-wide k step is one
// mma.sync.m16n8k32 e4m3 x e4m3 -> fp32 (FP4 e2m1 weights are re-coded exactly as e4m3, value
// times 2^-6) whose result is scaled by s_w * s_x and added to an fp32 accumulator.
//
// Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit inputs; g = lane / 4, t = lane % 4):
//   A reg0/reg2: row g, k 4t..4t+3 / 16+4t..; reg1/reg3: row g+8, same k.  B reg0/reg1: column
//   (token) g, the same k as A reg0/reg2.  C: c0,c1 row g, tokens 2t, 2t+1; c2,c3 row g+8.
// A k "pair" is 64 columns (two mma steps). FP8 (pre-tiled by TileFp8ForMma): lane t takes bytes
// [16t, 16t+16) of the pair from rows g and g+8 (its first 8 bytes feed step 0, the last 8 step 1)
// and the same 16 bytes of the quantized activation. FP4 (pre-tiled by TileFp4ForMma): lane t takes
// the 32-bit word t of each step's 16-byte row chunk (the step's 32 columns = one FP4 scale group):
// columns 8t..8t+7 of the group, re-coded so that k0..k3 come out by one mask and k4..k7 by two
// shifts; reg0 of half-step h takes k2h, k2h+1 and reg2 k4+2h, k5+2h, so the activation's 16 bytes
// feed the B registers as loaded.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace dsinfer::backend::cuda::qcore {

constexpr int kQb = 128;  // act_quant block

// The block's power-of-two scale (returned) and its inverse (*inv) from the block's max |value|
// (exact whatever order the max was taken in).
__device__ __forceinline__ float QuantScaleOf(float amax, float* inv) {
  const uint32_t bits = __float_as_uint(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
  const int e = static_cast<int>((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) != 0 ? 1 : 0);
  *inv = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
  return __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
}

// One value already multiplied by its block's inverse scale -> its e4m3 code (the conversion
// every act_quant applies to each of its values).
__device__ __forceinline__ uint8_t QuantCode(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
// The same code's e4m3 value as f16 bits.
__device__ __forceinline__ uint16_t QuantValueF16(float v) {
  return __nv_cvt_fp8_to_halfraw(QuantCode(v), __NV_E4M3).x;
}
// Four values times a block's inverse scale -> their e4m3 codes (v.x in the low byte).
__device__ __forceinline__ uint32_t QuantCodes4(float4 v, float inv) {
  const __nv_fp8x2_storage_t lo =
      __nv_cvt_float2_to_fp8x2(make_float2(v.x * inv, v.y * inv), __NV_SATFINITE, __NV_E4M3);
  const __nv_fp8x2_storage_t hi =
      __nv_cvt_float2_to_fp8x2(make_float2(v.z * inv, v.w * inv), __NV_SATFINITE, __NV_E4M3);
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// One act_quant block held 4 values per lane (lane l: columns 4l..4l+3, missing columns as 0):
// the lane's 4 e4m3 codes (column 4l in the low byte), and the block's scale in *scale.
__device__ __forceinline__ uint32_t QuantBlockCodes(float4 v, float* scale) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float inv;
  *scale = QuantScaleOf(amax, &inv);
  return QuantCodes4(v, inv);
}

// The same block held by 8 lanes, 16 values each (lanes 8j..8j+7 of a warp hold one block, lane
// 8j+i its columns 16i..16i+15 in v[0..3]; every lane of the warp takes part): the lane's 16 e4m3
// codes (column 16i in the low byte of .x), and the block's scale in *scale. QuantBlockCodes'
// bits, with four blocks a warp in flight at once.
__device__ __forceinline__ uint4 QuantBlockCodes16(const float4 (&v)[4], float* scale) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    amax = fmaxf(amax,
                 fmaxf(fmaxf(fabsf(v[k].x), fabsf(v[k].y)), fmaxf(fabsf(v[k].z), fabsf(v[k].w))));
#pragma unroll
  for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float inv;
  *scale = QuantScaleOf(amax, &inv);
  return make_uint4(QuantCodes4(v[0], inv), QuantCodes4(v[1], inv), QuantCodes4(v[2], inv),
                    QuantCodes4(v[3], inv));
}

// The same block's 4 quantized values as f16 (e4m3 values are exact in f16: the tensor cores take
// them as f16, spec §2.12's e4m3 products are exact either way).
__device__ __forceinline__ uint2 QuantBlock(float4 v, float* scale) {
  const uint32_t codes = QuantBlockCodes(v, scale);
  const auto lo = static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu);
  const auto hi = static_cast<__nv_fp8x2_storage_t>(codes >> 16);
  const __half2_raw hl = __nv_cvt_fp8x2_to_halfraw2(lo, __NV_E4M3),
                    hh = __nv_cvt_fp8x2_to_halfraw2(hi, __NV_E4M3);
  return make_uint2(static_cast<uint32_t>(hl.x) | (static_cast<uint32_t>(hl.y) << 16),
                    static_cast<uint32_t>(hh.x) | (static_cast<uint32_t>(hh.y) << 16));
}

__device__ __forceinline__ float4 LoadX4(const float* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// Two e4m3 bytes (low 16 bits of v) -> f16x2, exact (the hardware conversion).
__device__ __forceinline__ uint32_t E4m3x2ToF16x2(uint32_t v) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// A TileFp4ForMma word (8 e2m1 values, columns k0..k7 of a row) -> the high bytes of f16 (value *
// 2^-14, exact: sign to bit 7, the 3 exponent and mantissa bits to 3..1), one byte each: byte i of
// the word holds k_i in that form already and k_{4+i} in bits 0 (sign) and 6..4, so k0..k3 come
// out by one mask and k4..k7 by two shifts. Integer ops only.
__device__ __forceinline__ uint32_t Fp4LowToF16Hi(uint32_t v) { return v & 0x8e8e8e8eu; }
__device__ __forceinline__ uint32_t Fp4HighToF16Hi(uint32_t v) {
  return ((v >> 3) & 0x0e0e0e0eu) | ((v << 7) & 0x80808080u);
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

// An FP4 scale byte as stored by TileFp4ScalesForMma (Fp4GpuScaleByte of the ue8m0 byte b) as the
// float 2^(b - 127) * 2^14 (the FP4 weights enter the mma as f16 value * 2^-14).
__device__ __forceinline__ float Fp4GpuScale(uint32_t biased) {
  return __uint_as_float(biased << 23);
}

// A lane's A fragments (four m16n8k16 steps q, registers 0..3) of one 64-column pair of a 16-row
// tile, as f16. FP8 (TileFp8ForMma): step q takes the 4 bytes of word q of the lane's 16 (lo: rows
// g, hi: rows g+8), k 16t + 4q + 0..3. FP4 (TileFp4ForMma word quad w): step q = 2j + h takes k
// 32j + 8t + 4h + 0..3 of words (w.x, w.y) for j = 0 and (w.z, w.w) for j = 1 (rows g, g+8):
// reg0/reg1 the first two, reg2/reg3 the last two. Every kernel converts through these.
__device__ __forceinline__ void Fp8Fragments(const uint4& lo, const uint4& hi,
                                             uint32_t (&af)[4][4]) {
  const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    af[q][0] = E4m3x2ToF16x2(wl[q]);
    af[q][1] = E4m3x2ToF16x2(wh[q]);
    af[q][2] = E4m3x2ToF16x2(wl[q] >> 16);
    af[q][3] = E4m3x2ToF16x2(wh[q] >> 16);
  }
}
__device__ __forceinline__ void Fp4Fragments(const uint4& w, uint32_t (&af)[4][4]) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint32_t wg = j == 0 ? w.x : w.z, wh = j == 0 ? w.y : w.w;
    const uint32_t eg = Fp4LowToF16Hi(wg), og = Fp4HighToF16Hi(wg);
    const uint32_t eh = Fp4LowToF16Hi(wh), oh = Fp4HighToF16Hi(wh);
    // Step 2j takes columns k0..k3 (a0/a1: k0, k1; a2/a3: k2, k3), step 2j + 1 k4..k7.
    af[2 * j][0] = HiBytesToF16x2(eg, 0x1404u);
    af[2 * j][1] = HiBytesToF16x2(eh, 0x1404u);
    af[2 * j][2] = HiBytesToF16x2(eg, 0x3424u);
    af[2 * j][3] = HiBytesToF16x2(eh, 0x3424u);
    af[2 * j + 1][0] = HiBytesToF16x2(og, 0x1404u);
    af[2 * j + 1][1] = HiBytesToF16x2(oh, 0x1404u);
    af[2 * j + 1][2] = HiBytesToF16x2(og, 0x3424u);
    af[2 * j + 1][3] = HiBytesToF16x2(oh, 0x3424u);
  }
}

// The staged position of column c (0..63) of a 64-column pair (QOrder kWgFp8 / kWgFp4): step * 16
// + half * 8 + 2 * t + e holds the column that PairMma's lane t gives B register `half` (k slots
// 2t + e + 8 * half) of k16 step `step`. FP8: lane t's columns 16t .. 16t + 15, word w = 2 * step
// + half; FP4: per 32-column group j, lane t's columns 32j + 8t .. + 7, word w = 2 * (step - 2j)
// + half. So the (token, step, half) rows of wgmma's B core matrices are 16 contiguous bytes.
__host__ __device__ constexpr int StagedPos(bool fp4, int c) {
  const int u = c / 2;  // the f16x2 word
  const int step = fp4 ? 2 * (u / 16) + (u % 4) / 2 : (u % 8) / 2;
  const int t = fp4 ? (u % 16) / 4 : u / 8;
  return step * 16 + (u % 2) * 8 + 2 * t + c % 2;
}

template <bool kFp4, int kD>
struct QCfg {
  // k pairs per warp slice: 8 (512 columns) for one FP8 weight, else 4. Measured (bench_gemv,
  // H200): shorter FP8 slices with the next one double-buffered in registers were no faster.
  static constexpr int kP = (kD == 2 || kFp4) ? 4 : 8;
  static constexpr int kKs = 64 * kP;       // slice width
  static constexpr int kAw = kFp4 ? 1 : 2;  // uint4 of A per pair and weight
};

// Where a warp's B fragments (the quantized activation rows) come from for one k slice: f16 rows
// qbase[row * qld + column] and scales sbase[row * sld + column / 128], columns relative to the
// slice start. Per lane and token tile nt: the offset (row * qld) of its B column's row (token
// nt*8 + g) and (row * sld) of its two C columns' rows (tokens nt*8 + 2t, +1), set once per slice;
// -1: no such token. The launcher keeps rows * ld below 2^31.
template <int kNT>
struct BSrc {
  const uint16_t* qbase;
  const float* sbase;
  int32_t qoff[kNT], soff[kNT][2];
  // The activation scale of token column c (0/1) of the lane in token tile nt, for pair pp.
  __device__ __forceinline__ float act_scale(int nt, int c, int pp) const {
    return soff[nt][c] >= 0 ? sbase[soff[nt][c] + pp / 2] : 0.0f;
  }
};

// The scale steps after an mma chain r (C fragment: r[0], r[1] row g, tokens 2t, 2t + 1; r[2],
// r[3] row g + 8). FP4: a 32-column group's r times the rows' weight scales (sg row g, sh row
// g + 8) into the 128-column block sum blk. FP8: a pair's r times s_w * s_x into acc. PairSteps and
// the tiled GEMM's wgmma path both scale through these: one operation sequence.
__device__ __forceinline__ void GroupIntoBlock(const float* r, float sg, float sh,
                                               float (&blk)[4]) {
  blk[0] = fmaf(r[0], sg, blk[0]);
  blk[1] = fmaf(r[1], sg, blk[1]);
  blk[2] = fmaf(r[2], sh, blk[2]);
  blk[3] = fmaf(r[3], sh, blk[3]);
}
__device__ __forceinline__ void PairIntoAcc(const float* r, float sg, float sh, float sx0,
                                            float sx1, float (&acc)[4]) {
  acc[0] = fmaf(r[0], sg * sx0, acc[0]);
  acc[1] = fmaf(r[1], sg * sx1, acc[1]);
  acc[2] = fmaf(r[2], sh * sx0, acc[2]);
  acc[3] = fmaf(r[3], sh * sx1, acc[3]);
}

// One 16 x 8 output tile's arithmetic for one 64-column pair, given the lane's A fragments af,
// B fragments b ([step q][register]), the weight scales of rows g / g+8 per 32-column group j (sg,
// sh; FP8: one block scale in [0]) and the activation scales of the lane's two tokens (sx0, sx1;
// FP8 only). FP8: the pair's 4 steps chained from zero, r scaled by s_w * s_x into acc. FP4: per
// group j, its 2 steps from zero, r scaled by the rows' s_w into the 128-column block sum blk,
// which meets s_x once per block (FlushBlock). Every kernel computes a pair through this function:
// the bits are the same whatever kernel, tile or grid.
template <bool kFp4>
__device__ __forceinline__ void PairSteps(const uint32_t (&af)[4][4], const uint32_t (&b)[4][2],
                                          const float (&sg)[2], const float (&sh)[2], float sx0,
                                          float sx1, float (&acc)[4], float (&blk)[4]) {
#pragma unroll
  for (int j = 0; j < (kFp4 ? 2 : 1); ++j) {
    float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = kFp4 ? 2 * j : 0; q < (kFp4 ? 2 * j + 2 : 4); ++q)
      Hmma(af[q], b[q][0], b[q][1], r);
    if constexpr (kFp4) {
      GroupIntoBlock(r, sg[j], sh[j], blk);
    } else {
      PairIntoAcc(r, sg[j], sh[j], sx0, sx1, acc);
    }
  }
}
// FP4: whether pair `pair` (of `npairs`, counted from a 128-column boundary) ends a 128-column
// block, and the block's sums meeting the activation scales of the lane's two tokens.
__device__ __forceinline__ bool BlockEnds(int64_t pair, int64_t npairs) {
  return pair % 2 == 1 || pair + 1 == npairs;
}
__device__ __forceinline__ void FlushBlock(float (&blk)[4], float sx0, float sx1, float (&acc)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[i] = fmaf(blk[i], i % 2 ? sx1 : sx0, acc[i]);
    blk[i] = 0.0f;
  }
}

// The tiled GEMMs (qgemm_wg_sm90.cu, qgemm_ws_sm90.cu) at a k slice's end: the slice's sums acc
// join the running totals in slice order (the first slice's as they are; QLinearKernel's order of
// the slices' sums), and acc is zeroed for the next slice. totals[ni * stride] holds n8 tile ni's
// four C-fragment values (in shared memory: the totals do not fit in registers beside acc).
template <int kNT>
__device__ __forceinline__ void SliceIntoTotals(float (&acc)[kNT][4], float4* totals, int stride,
                                                bool first) {
#pragma unroll
  for (int ni = 0; ni < kNT; ++ni) {
    float4 tot;
    if (first) {
      tot = make_float4(acc[ni][0], acc[ni][1], acc[ni][2], acc[ni][3]);
    } else {
      tot = totals[ni * stride];
      tot.x += acc[ni][0];
      tot.y += acc[ni][1];
      tot.z += acc[ni][2];
      tot.w += acc[ni][3];
    }
    totals[ni * stride] = tot;
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[ni][i] = 0.0f;
  }
}

// One 64-column pair pp (of npairs in the slice) of a warp's 16-row tile against every token
// tile: the lane's A words (FP8: a[d][0] rows g, a[d][1] rows g+8, bytes 16t..16t+15 of the pair;
// FP4: a[d][0], the TileFp4ForMma word quad), the weight scales (FP8: swf, the pair's block scale;
// FP4: swb, the scale bytes of rows g / g+8 for steps 0 / 1), into acc (FP4: through the 128-column
// block sum blk). Every kernel computes a slice through this one function, pairs in order from
// zeroed acc/blk: the same fp32 operations whatever kernel, tile or grid.
template <bool kFp4, int kNT, int kD>
__device__ __forceinline__ void PairMma(const uint4 (&a)[kD][QCfg<kFp4, kD>::kAw],
                                        const float (&swf)[kD], const uint32_t (&swb)[kD],
                                        const BSrc<kNT>& bs, int pp, int npairs,
                                        float (&acc)[kD][kNT][4], float (&blk)[kD][kNT][4]) {
  const int lane = threadIdx.x % 32, t = lane % 4;
  // The pair's A fragments as f16 (Fp8Fragments / Fp4Fragments), once for all token tiles; sg/sh:
  // the weight scales of rows g and g+8 per 32-column step j.
  uint32_t af[kD][4][4];
  float sg[kD][2], sh[kD][2];
#pragma unroll
  for (int d = 0; d < kD; ++d) {
    if constexpr (kFp4) {
      Fp4Fragments(a[d][0], af[d]);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        sg[d][j] = Fp4GpuScale((swb[d] >> (8 * j)) & 0xff);
        sh[d][j] = Fp4GpuScale((swb[d] >> (16 + 8 * j)) & 0xff);
      }
    } else {
      Fp8Fragments(a[d][0], a[d][1], af[d]);
      sg[d][0] = sh[d][0] = sg[d][1] = sh[d][1] = swf[d];
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    uint32_t b[4][2];  // [step q][reg]: the lane's activations at its A values' k
    const uint16_t* bp = bs.qbase + bs.qoff[nt] + 64 * pp;
    if constexpr (kFp4) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (bs.qoff[nt] >= 0) v = *reinterpret_cast<const uint4*>(bp + 32 * j + 8 * t);
        // The lane's 8 columns k0..k7 as loaded: step 2j takes (k0, k1) and (k2, k3), step
        // 2j + 1 (k4, k5) and (k6, k7), as the A fragments above: each step's B operand is a
        // register pair of the load (no moves before the mma).
        b[2 * j][0] = v.x;
        b[2 * j][1] = v.y;
        b[2 * j + 1][0] = v.z;
        b[2 * j + 1][1] = v.w;
      }
    } else {
      uint4 v0 = make_uint4(0, 0, 0, 0), v1 = make_uint4(0, 0, 0, 0);
      if (bs.qoff[nt] >= 0) {
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
    float sx0 = 0.0f, sx1 = 0.0f;  // FP8: the pair's activation scales (FP4: at the block's end)
    if constexpr (!kFp4) {
      sx0 = bs.act_scale(nt, 0, pp);
      sx1 = bs.act_scale(nt, 1, pp);
    }
#pragma unroll
    for (int d = 0; d < kD; ++d)
      PairSteps<kFp4>(af[d], b, sg[d], sh[d], sx0, sx1, acc[d][nt], blk[d][nt]);
  }
  if constexpr (kFp4) {
    if (BlockEnds(pp, npairs)) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const float sx0 = bs.act_scale(nt, 0, pp), sx1 = bs.act_scale(nt, 1, pp);
#pragma unroll
        for (int d = 0; d < kD; ++d) FlushBlock(blk[d][nt], sx0, sx1, acc[d][nt]);
      }
    }
  }
}

}  // namespace dsinfer::backend::cuda::qcore
