// The FP8 cache's packed rows on the device (backend/quant_codec.h's qc::PackedRow: codes, then
// the bf16 tail, then one scale byte per block): the kernels that write the state encode them,
// the kernels that read it decode 4 values at a time. Every decoded value is the CPU's
// KvFormat::Unpack value bit for bit: an e4m3 code converts exactly (to f16 by the hardware, then
// to f32), an e2m1 code through the codec, and value = code value x scale rounds once (__fmul_rn,
// as the codec's Mul). An encoded block is the codec's: the scale byte of the block's absolute
// maximum, each code of x / scale, so the row decodes to what the fake-quantizer computes from
// the same values (FqScale / FqValue).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/quant_codec.h"

namespace dsinfer::backend::cuda {

// Four e4m3 codes (the low byte first) times the scale s.
__device__ __forceinline__ float4 E4m3x4Times(uint32_t codes, float s) {
  const __half2_raw lo =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xFFFFu), __NV_E4M3);
  const __half2_raw hi =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes >> 16), __NV_E4M3);
  const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
  return make_float4(__fmul_rn(a.x, s), __fmul_rn(a.y, s), __fmul_rn(b.x, s), __fmul_rn(b.y, s));
}

// Values c .. c + 3 of a packed row (c % 4 == 0; the four all codes or all tail values; the row
// 4-byte aligned; global or shared memory: plain loads).
__device__ __forceinline__ float4 PackedLoad4(const qc::PackedRow& f, const void* row, int c) {
  const auto* b = static_cast<const uint8_t*>(row);
  if (c >= f.q) {  // 4 bf16 values: two aligned words
    const uint32_t* w = reinterpret_cast<const uint32_t*>(b + f.tail_at() + 2 * (c - f.q));
    const uint32_t w0 = w[0], w1 = w[1];
    return make_float4(__uint_as_float(w0 << 16), __uint_as_float(w0 & 0xFFFF0000u),
                       __uint_as_float(w1 << 16), __uint_as_float(w1 & 0xFFFF0000u));
  }
  const float s = qc::ScaleOfByte(f.kind, b[f.scales_at() + c / f.block]);
  if (f.fp8()) return E4m3x4Times(*reinterpret_cast<const uint32_t*>(b + c), s);
  const uint32_t n = *reinterpret_cast<const uint16_t*>(b + c / 2);  // four nibbles
  return make_float4(qc::Mul(qc::E2m1Value(n & 0xF), s), qc::Mul(qc::E2m1Value((n >> 4) & 0xF), s),
                     qc::Mul(qc::E2m1Value((n >> 8) & 0xF), s), qc::Mul(qc::E2m1Value(n >> 12), s));
}

// Where a 4-value group c .. c + 3 of a packed FP8 row sits (c % 4 == 0; the four all codes or
// all tail values): worked out once by a lane that reads the same group of many rows, so that
// reading one costs no division (the block index) and no format test.
struct PackedGroup4 {
  int at = 0;         // byte offset of the 4 codes, or of the 4 tail values' two words
  int scale_at = -1;  // byte offset of the codes' scale byte; -1: tail values
};
__device__ __forceinline__ PackedGroup4 PackedGroupOf(const qc::PackedRow& f, int c) {
  PackedGroup4 g;
  if (c >= f.q) {
    g.at = f.tail_at() + 2 * (c - f.q);
  } else {
    g.at = c;
    g.scale_at = f.scales_at() + c / f.block;
  }
  return g;
}

// PackedLoad4's values of an FP8 row's group (f.fp8(): power-of-two scales) as bf16 bits (two
// words, the lower value in each low half), for rows whose values are bf16 values (the FP8
// cache's: its scales are at least 2^-22, every value a normal bf16 value or zero): the tail words
// as stored, the codes' values converted exactly. The row 4-byte aligned, in global or shared
// memory.
__device__ __forceinline__ uint2 PackedLoad4Bf16(const void* row, PackedGroup4 g) {
  const auto* b = static_cast<const uint8_t*>(row);
  if (g.scale_at < 0) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(b + g.at);
    return make_uint2(w[0], w[1]);
  }
  const float4 v = E4m3x4Times(*reinterpret_cast<const uint32_t*>(b + g.at),
                               qc::ScaleOfByte(qc::Kind::kFp8Pow2, b[g.scale_at]));
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  return make_uint2(*reinterpret_cast<const uint32_t*>(&lo),
                    *reinterpret_cast<const uint32_t*>(&hi));
}

// Encodes block `blk` of a row's coded values (x: its `f.block` values, not yet rounded) into the
// packed row `row`, by one thread: the scale byte and the codes (FP4: whole bytes, f.block even).
__device__ __forceinline__ void PackBlockSerial(const qc::PackedRow& f, const float* x, int blk,
                                                uint8_t* row) {
  float amax = 0.0f;
  for (int i = 0; i < f.block; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const uint8_t sb = qc::ScaleByte(f.kind, amax);
  const float s = qc::ScaleOfByte(f.kind, sb);
  row[f.scales_at() + blk] = sb;
  const int first = blk * f.block;
  if (f.fp8()) {
    for (int i = 0; i < f.block; ++i) row[first + i] = qc::Code(f.kind, x[i], s);
  } else {
    for (int i = 0; i < f.block; i += 2) {
      row[(first + i) / 2] =
          static_cast<uint8_t>(qc::Code(f.kind, x[i], s) | (qc::Code(f.kind, x[i + 1], s) << 4));
    }
  }
}

// Tail value j (< f.tail) of a packed row, rounded to bf16 as the CPU stores it.
__device__ __forceinline__ void PackTailValue(const qc::PackedRow& f, float v, int j,
                                              uint8_t* row) {
  reinterpret_cast<uint16_t*>(row + f.tail_at())[j] = qc::FloatToBf16(v);
}

}  // namespace dsinfer::backend::cuda
