// Device helpers of the FP8-instruction numerics mode (backend/wgmma_fp8.h; its kernels in
// fp8mma_linear_sm90.cu, its experiments in bench/): warpgroup MMA .e4m3 at N = 8, 32, 64, 96, 128,
// 160, 192 and 256 (A from registers or shared memory, B from shared memory through a descriptor),
// prmt, and the e2m1 -> e4m3 conversion of four codes. Internal to backend/cuda.
#pragma once

#include <cstdint>

#include "backend/wgmma_fp8.h"
#include "base/dtype.h"

namespace dsinfer::backend::cuda::fp8mma {

// The k slices of the FP8-instruction linear (its CPU reference's, backend/wgmma_fp8.h), for
// device code built without --expt-relaxed-constexpr (the benches).
__host__ __device__ constexpr int SliceCols(bool fp4) { return fp4 ? 256 : 512; }
static_assert(SliceCols(false) == ::dsinfer::backend::fp8mma::SliceCols(false) &&
                  SliceCols(true) == ::dsinfer::backend::fp8mma::SliceCols(true),
              "the kernels' k slices are the reference's");

// wgmma m64n8k32 .e4m3, A from registers, B (K-major, no swizzle) through its descriptor;
// scale_d 0: D = A B (C not read).
__device__ __forceinline__ void WgmmaFp8N8(float (&d)[4], const uint32_t (&a)[4], uint64_t desc,
                                           int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, "
      "1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

// wgmma m64n128k32 .e4m3, A from registers, B (K-major, no swizzle) through its descriptor;
// scale_d 0: D = A B. d[4j + 0..3]: n8 tile j's fragment of the warp's rows (rows g, g + 8).
#define FP8MMA_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define FP8MMA_F16(i) FP8MMA_F4(i), FP8MMA_F4(i + 4), FP8MMA_F4(i + 8), FP8MMA_F4(i + 12)
__device__ __forceinline__ void WgmmaFp8N128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16), FP8MMA_F16(32), FP8MMA_F16(48)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
// The same step at N = 32, 64 and 96 (a tile's last, partly filled token rows).
__device__ __forceinline__ void WgmmaFp8N32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
      : FP8MMA_F16(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
__device__ __forceinline__ void WgmmaFp8N64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
__device__ __forceinline__ void WgmmaFp8N96(float (&d)[48], const uint32_t (&a)[4], uint64_t desc,
                                            int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, "
      "{%48,%49,%50,%51}, %52, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16), FP8MMA_F16(32)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
// The same step at N = 160 and 192 (the experts' wide token tiles,
// KernelOptions::fp8mma_wide_experts).
__device__ __forceinline__ void WgmmaFp8N160(float (&d)[80], const uint32_t (&a)[4], uint64_t desc,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}, "
      "{%80,%81,%82,%83}, %84, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16), FP8MMA_F16(32), FP8MMA_F16(48), FP8MMA_F16(64)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
__device__ __forceinline__ void WgmmaFp8N192(float (&d)[96], const uint32_t (&a)[4], uint64_t desc,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
      "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
      "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, "
      "{%96,%97,%98,%99}, %100, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16), FP8MMA_F16(32), FP8MMA_F16(48), FP8MMA_F16(64),
        FP8MMA_F16(80)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
// The same step with A from shared memory too (both operands K-major through their descriptors,
// e.g. 128-byte-swizzled TMA boxes: WgmmaDescSw128).
__device__ __forceinline__ void WgmmaFp8N128Ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                               int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : FP8MMA_F16(0), FP8MMA_F16(16), FP8MMA_F16(32), FP8MMA_F16(48)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
// wgmma m64n256k32 .e4m3, A from registers, B (K-major, no swizzle) through its descriptor;
// scale_d 0: D = A B. d[4j + 0..3] is n8 tile j's fragment (as m16n8k16's C of the warp's rows).
#define FP8MMA_F64(i) FP8MMA_F16(i), FP8MMA_F16(i + 16), FP8MMA_F16(i + 32), FP8MMA_F16(i + 48)
__device__ __forceinline__ void WgmmaFp8N256(float (&d)[128], const uint32_t (&a)[4], uint64_t desc,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
      "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,"
      "%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,"
      "%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,"
      "%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,"
      "%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,"
      "%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1;\n}\n"
      : FP8MMA_F64(0), FP8MMA_F64(64)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
#undef FP8MMA_F64
#undef FP8MMA_F16
#undef FP8MMA_F4

// wgmma m64nNk32 .e4m3 at N = 8, 32, 64, 96, 128, 160 or 192 (A from registers, B through its
// descriptor).
template <int kN>
__device__ __forceinline__ void WgmmaFp8Rs(float (&d)[kN / 2], const uint32_t (&a)[4],
                                           uint64_t desc, int scale_d) {
  if constexpr (kN == 8) {
    WgmmaFp8N8(d, a, desc, scale_d);
  } else if constexpr (kN == 32) {
    WgmmaFp8N32(d, a, desc, scale_d);
  } else if constexpr (kN == 64) {
    WgmmaFp8N64(d, a, desc, scale_d);
  } else if constexpr (kN == 96) {
    WgmmaFp8N96(d, a, desc, scale_d);
  } else if constexpr (kN == 160) {
    WgmmaFp8N160(d, a, desc, scale_d);
  } else if constexpr (kN == 192) {
    WgmmaFp8N192(d, a, desc, scale_d);
  } else {
    static_assert(kN == 128, "N of 8, 32, 64, 96, 128, 160 or 192");
    WgmmaFp8N128(d, a, desc, scale_d);
  }
}

// prmt.b32 (PTX, default mode): byte i of the result is byte (sel nibble i) & 7 of {b, a}, or, when
// that nibble's bit 3 is set, the selected byte's sign bit over all 8 bits. The host form (the
// host check) follows the PTX ISA's definition.
__host__ __device__ __forceinline__ uint32_t Prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#else
  const uint64_t pool = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nib = (sel >> (4 * i)) & 15u;
    uint32_t byte = static_cast<uint32_t>(pool >> (8 * (nib & 7u))) & 0xffu;
    if (nib & 8u) byte = (byte & 0x80u) != 0 ? 0xffu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}
// Four e2m1 codes (the low 16 bits of v, the lowest k in the lowest nibble) -> their four e4m3
// bytes (the same values): the magnitudes through a byte table (0, 0.5, 1, 1.5, 2, 3, 4, 6 ->
// 0x00, 0x30, 0x38, 0x3c, 0x40, 0x44, 0x48, 0x4c), the signs through prmt's sign-replicate mode
// (a selector nibble with bit 3 set gives 0xff from a byte 0x80, else 0x80).
// With the magnitudes' bytes from a table (lo: codes 0..3, hi: 4..7; here e4m3 of 0 .. 6), the
// same turns four codes into e4m3 codes of their values times 2^-d (the FP8-instruction mode's FP4
// operand, base/dtype.h E2M1ToE4M3Shifted: the table of shift d).
__host__ __device__ __forceinline__ uint32_t E2m1x4ToE4m3(uint32_t v, uint32_t lo, uint32_t hi) {
  const uint32_t mag = Prmt(lo, hi, v & 0x7777u);
  const uint32_t rep = Prmt(0x80808080u, 0x80808080u, v & 0xffffu);
  return mag | (((rep & 0x7f7f7f7fu) << 1) & 0x80808080u);
}
__host__ __device__ __forceinline__ uint32_t E2m1x4ToE4m3(uint32_t v) {
  return E2m1x4ToE4m3(v, 0x3c383000u, 0x4c484440u);
}
// The table of shift d (host): byte i of {lo, hi} is E2M1ToE4M3Shifted(i, d), the CPU
// reference's code of magnitude i times 2^-d (the kernels' TileArgs::fp4_tab, d = 0..15).
inline uint2 E2m1ShiftTable(int d) {
  uint32_t w[2] = {0, 0};
  for (int i = 0; i < 8; ++i)
    w[i / 4] |= static_cast<uint32_t>(E2M1ToE4M3Shifted(static_cast<uint8_t>(i), d))
                << (8 * (i % 4));
  return make_uint2(w[0], w[1]);
}

}  // namespace dsinfer::backend::cuda::fp8mma
