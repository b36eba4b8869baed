// Warpgroup MMA (wgmma.mma_async, sm_90a), internal to backend/cuda (and bench/probe_wgmma_bits,
// which checks these wrappers): f16 or bf16 inputs, fp32 accumulators (N 8, 32, 64 or 128), A from
// registers, B from shared memory through a matrix descriptor. A's register fragment of warp w of
// the warpgroup is mma.sync m16n8k16's A fragment of rows 16w .. 16w + 15, and the accumulator d[4j
// + 0..3] is mma.sync's C fragment of n8 tile j of those rows. Each k16 step rounds as mma.sync
// m16n8k16 does, bit for bit (bench/probe_wgmma_bits.cu, H200: 0 mismatches), so a kernel built on
// these keeps the bits of the mma.sync kernels.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// B of one k16 step in shared memory, K-major, no swizzle: core matrix (k half kh, n group nb) =
// 8 n rows x 8 k (16 bytes each), 128 contiguous bytes, at (kh * N / 8 + nb) * 128 bytes: the
// leading byte offset (k halves) N * 16, the stride byte offset (n groups) 128. So token n's 8 k
// values of half kh sit at byte kh * N * 16 + n * 16.
template <int kN>
__device__ __forceinline__ uint64_t WgmmaDescB(uint32_t smem_addr) {
  constexpr uint32_t kLbo = kN * 16, kSbo = 128;
  return static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4) |
         (static_cast<uint64_t>((kLbo >> 4) & 0x3fffu) << 16) |
         (static_cast<uint64_t>((kSbo >> 4) & 0x3fffu) << 32);
}

// B in shared memory, K-major with the 128-byte swizzle (as a TMA box of 128-byte rows lands with
// CU_TENSOR_MAP_SWIZZLE_128B): row n's 16-byte chunk j at byte n * 128 + ((j ^ n % 8) * 16) of a
// 1024-byte aligned tile; 8-row atoms 1024 bytes apart (the stride byte offset). The k16 step q of
// a row's 64 f16 starts at the tile's address + 32 q (the swizzle applies to the whole address).
__device__ __forceinline__ uint64_t WgmmaDescSw128(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// B in shared memory, N-major with the 128-byte swizzle (for Wgmma's kTransB): each k row holds
// 64 consecutive n (128 bytes) of an atom of 8 k rows x 64 n (1024 bytes, 1024-byte aligned), its
// 16-byte chunk j at byte k * 128 + ((j ^ k % 8) * 16); the atoms of the next 8 k rows 1024 bytes
// on (the stride byte offset), those of the next 64 n `n_atom_bytes` on (the leading byte offset;
// used when the instruction's N is over 64).
__device__ __forceinline__ uint64_t WgmmaDescMnSw128(uint32_t smem_addr, uint32_t n_atom_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3ffffu) >> 4) |
         (static_cast<uint64_t>((n_atom_bytes >> 4) & 0x3fffu) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across the asynchronous MMA.
template <int kF>
__device__ __forceinline__ void WgmmaFenceOperand(float (&d)[kF]) {
#pragma unroll
  for (int i = 0; i < kF; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// The same for A fragments held in registers: wgmma reads them asynchronously too, so a fragment
// must stay unchanged, and its registers unused by other values, until the wait that retires its
// last wgmma. Fencing the fragments after that wait keeps them live through it (without it the
// compiler may place values computed meanwhile, such as the next step's fragments, in their
// registers while the wgmma still reads them: the wrong bits of session 32, docs/perf.md).
template <int kQ>
__device__ __forceinline__ void WgmmaFenceOperand(uint32_t (&a)[kQ][4]) {
#pragma unroll
  for (int q = 0; q < kQ; ++q)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[q][i])::"memory");
}
// Generic-proxy writes of shared memory (cp.async, stores) made visible to wgmma's reads.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define DSINFER_WG_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define DSINFER_WG_F16(i) \
  DSINFER_WG_F4(i), DSINFER_WG_F4(i + 4), DSINFER_WG_F4(i + 8), DSINFER_WG_F4(i + 12)
#define DSINFER_WG_N8(TY, TB)                                    \
  asm volatile(                                                  \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                \
      "wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY     \
      " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, " TB ";\n}\n" \
      : DSINFER_WG_F4(0)                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))
#define DSINFER_WG_N32(TY, TB)                                    \
  asm volatile(                                                   \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY     \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}," \
      " {%16,%17,%18,%19}, %20, p, 1, 1, " TB ";\n}\n"            \
      : DSINFER_WG_F16(0)                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))
#define DSINFER_WG_N64(TY, TB)                                            \
  asm volatile(                                                           \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                        \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY             \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"          \
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}," \
      " {%32,%33,%34,%35}, %36, p, 1, 1, " TB ";\n}\n"                    \
      : DSINFER_WG_F16(0), DSINFER_WG_F16(16)                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))
#define DSINFER_WG_N128(TY, TB)                                                       \
  asm volatile(                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                    \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY                        \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                      \
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"              \
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"              \
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"             \
      " {%64,%65,%66,%67}, %68, p, 1, 1, " TB ";\n}\n"                                \
      : DSINFER_WG_F16(0), DSINFER_WG_F16(16), DSINFER_WG_F16(32), DSINFER_WG_F16(48) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d))

// d = A (64 x 16) * B (16 x kN) + (scale_d ? d : 0), f16 (or bf16) inputs, fp32 accumulators.
// kTransB: B is N-major (imm-trans-b: each k row's N values contiguous, WgmmaDescMnSw128), else
// K-major. (DSINFER_WG_CALL: NM's asm for the template arguments' operand type and B's major-ness,
// both literals in the asm string.)
#define DSINFER_WG_CALL(NM)  \
  if constexpr (kBf16) {     \
    if constexpr (kTransB) { \
      NM("bf16", "1");       \
    } else {                 \
      NM("bf16", "0");       \
    }                        \
  } else {                   \
    if constexpr (kTransB) { \
      NM("f16", "1");        \
    } else {                 \
      NM("f16", "0");        \
    }                        \
  }
template <int kN, bool kBf16 = false, bool kTransB = false>
__device__ __forceinline__ void Wgmma(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                      int scale_d) {
  static_assert(kN == 8 || kN == 32 || kN == 64 || kN == 128);
  if constexpr (kN == 8) {
    DSINFER_WG_CALL(DSINFER_WG_N8)
  } else if constexpr (kN == 32) {
    DSINFER_WG_CALL(DSINFER_WG_N32)
  } else if constexpr (kN == 64) {
    DSINFER_WG_CALL(DSINFER_WG_N64)
  } else {
    DSINFER_WG_CALL(DSINFER_WG_N128)
  }
}
#undef DSINFER_WG_CALL

// d = A (64 x 16) * B (16 x kN) + (scale_d ? d : 0) with both operands in shared memory (A by
// desc_a, K-major like B), bf16 inputs, fp32 accumulators: the same arithmetic as the form with A
// in registers (bench/probe_wgmma_bits.cu: chains from a nonzero C round as mma.sync's, whatever
// N).
#define DSINFER_WG_SS_HEAD(N, SCALE)          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE \
  ", 0;\n"                                    \
  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16"
template <int kN>
__device__ __forceinline__ void WgmmaSsBf16(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b,
                                            int scale_d) {
  static_assert(kN == 32 || kN == 64 || kN == 128);
  if constexpr (kN == 32) {
    asm volatile(DSINFER_WG_SS_HEAD(32, 18)
                 " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"
                 " %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : DSINFER_WG_F16(0)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (kN == 64) {
    asm volatile(DSINFER_WG_SS_HEAD(64, 34)
                 " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
                 " %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : DSINFER_WG_F16(0), DSINFER_WG_F16(16)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(DSINFER_WG_SS_HEAD(128, 66)
                 " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
                 " %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : DSINFER_WG_F16(0), DSINFER_WG_F16(16), DSINFER_WG_F16(32), DSINFER_WG_F16(48)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

#undef DSINFER_WG_SS_HEAD
#undef DSINFER_WG_N128
#undef DSINFER_WG_N64
#undef DSINFER_WG_N32
#undef DSINFER_WG_N8
#undef DSINFER_WG_F16
#undef DSINFER_WG_F4

}  // namespace dsinfer::backend::cuda
