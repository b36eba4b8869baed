// Sparse MQA attention on the tensor cores (LaunchSparseAttentionTc, attention_sparse.cuh; #27).
//
// A block owns one query row's tile of 16 heads (one mma m tile; a last partial tile is padded
// with zero queries whose outputs are not written; the FP8 cache's many rows take the row block,
// attention_sparse_tc_row_sm90.cu, one block per row for all its tiles, with the same bits; what
// the kernels share is in attention_sparse_tc.cuh). The row's keys (window,
// then compressed entries, as the CUDA-core kernel lists them) go in chunks of kChunk = 32:
//   S  = Q[16 x dim] K^T[dim x 32]: warp w the chunk's keys 8 (w % 4) .. + 7 (one n tile) over
//        dim half w / 4 (two mma chains, even and odd k steps, added at the end; S = half 0 +
//        half 1)
//   softmax: warp w heads w and w + 8, an online step per chunk (max, correction, exp, sum)
//   O += P[16 x 32] V[32 x dim] (V = K): warp w the output columns [w dim / 8, (w + 1) dim / 8)
// then O / den (the sink in the denominator), the inverse RoPE of the trailing rope dims, the
// output and its optional act_quant, as the CUDA-core kernel. Each chunk's softmax partial (its
// max, sum and P V) is folded into the running one by one fixed function (Fold), so the chunks
// may run in one block (prefill, many rows: keys read from L2 as the steps need them) or one
// block each (few rows: the chunk's keys staged in shared memory by every thread with cp.async
// while the queries are prepared), a combine kernel folding the partials in chunk order with the
// same operations — the same bits.
//
// Precision. mma.sync m16n8k16 bf16 (fp32 accumulate) rather than m16n8k8 tf32: tf32 keeps 11
// significant bits, so 3xTF32 (big·big + big·small + small·big) drops small·small terms and the
// small part's own rounding, about 2^-21 relative per product, and runs at half bf16's rate; the
// bf16 split is exact. Every fp32 operand v (Q, K, P, V) is split v = v1 + v2 + v3 with
// v1 = bf16(v), v2 = bf16(v - v1), v3 = v - v1 - v2 (exact in bf16: fp32's 24 significant bits are
// three bf16's 8; as bf16_tc_linear's split), so |v2| <= 2^-8 |v|, |v3| <= 2^-16 |v|, and the
// product of two parts is exact in fp32. Of the nine part products the six of order <= 2 are kept
// (parts (i, j) with i + j <= 4), smallest first into one fp32 accumulator chain:
//   a3·b1, a2·b2, a1·b3, a2·b1, a1·b2, a1·b1
// The dropped a2·b3 + a3·b2 + a3·b3 are at most (2^-23 + 2^-32) |a||b| per product, below fp32's
// own rounding of the sum (2^-24 per addition), so each dot product is fp32-accurate: error about
// (length · 2^-24) of the sum of |products| at worst, from the accumulation as in any fp32 sum. The
// CUDA-core kernel's bits are not reproduced (another summation order), only its accuracy.
//
// qp_bf16 (DeepSeek-V4's FP8 cache, the official kernel's precision): the queries and each
// chunk's softmax weights P are rounded to bf16 (their parts 2 and 3 are then zeros, as the K=V
// values' are), so every S and P V step is the one product a1·b1: a third of the mma steps, the
// CPU's AttendHeadBf16 defining the values (P relative to its chunk's own max).
//
// Batch invariance: each output element's operation sequence — the chunking, the k-step order of
// the mma chains, the softmax steps, the epilogue — depends on (heads, dim, the row's key list) and
// on nothing else: not on the rows of the launch, the grid or which SM runs the block. A row run
// alone (decode) has the bits it has inside an 8,192-row prefill.
//
// Fragment orders (fixed: part of the operation sequence). Lane (g = lane / 4, q = lane % 4) holds
// k indices {2q, 2q+1} (a0/a1, b0) and {2q+8, 2q+9} (a2/a3, b1). S's k (dim) step s gives them the
// columns Off(s, q) .. +3, one float4 (pairs of steps cover 32 columns; staged key rows are
// KeyPitch apart, so the two rows a 128-bit phase reads hit distinct banks); P V's k (key) step s
// the keys 16s + 2q, +1 and 16s + 8 + 2q, +1 in order (staged bf16 rows: one ldmatrix .trans per
// n tile and step). The queries' split fragments are built once per block in shared memory.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/attention_sparse_tc.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/cuda/runtime.h"
#include "backend/softmax_fold.h"

namespace dsinfer::backend::cuda {

namespace {

using namespace attn_tc;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxNt = kMaxDim / (8 * kWarps);  // output n tiles per warp (dim 512: 8)
// The split's combine: a block per (row, tile, group of kCombineCols output columns), the fold
// factors of at most kMaxSplitChunks chunks in its shared memory.
constexpr int kCombineCols = 128;
constexpr int kMaxSplitChunks = 512;

// Floats of one chunk's partial in the split workspace: P V [kTile][dim], then max and sum [kTile].
__host__ __device__ constexpr int64_t PartFloats(int dim) {
  return static_cast<int64_t>(kTile) * dim + 2 * kTile;
}

// A staged chunk's key rows in shared memory: dim + 8 floats apart, so rows one apart start 8
// banks apart (S's float4 fragment loads and P V's scalar loads are conflict-free).
__host__ __device__ constexpr int KeyPitch(int dim) { return dim + 8; }

// Packed K=V rows (kv_format) are decoded once per chunk into bf16 rows (their values are bf16
// values) KeyPitch(dim) bf16 apart: rows one apart start 4 banks apart, so S's 8-byte fragment
// loads (8 rows x 4 lanes) take the two wavefronts their 256 bytes need and P V's 2-byte loads
// (4 rows x 8 columns) one.
constexpr size_t PackedKeyBytes(int dim) { return static_cast<size_t>(kChunk) * KeyPitch(dim) * 2; }

// Shared memory beyond the static arrays: the queries' split fragments [dim / 16][3][32] uint4, a
// [kTile][dim] fp32 staging area (the queries in the prologue, the output in the epilogue) and,
// staged (the split's blocks), the chunk's keys [kChunk][KeyPitch(dim)] (fp32; packed rows: bf16).
// Packed rows without the split stage each chunk's bf16 keys over the staging area, which they
// outgrow by 16 bf16 (the prologue is done with it before the first chunk, the epilogue starts
// after the last). Packed rows also take the raw rows of a chunk in flight (cp.async)
// [kChunk][raw_floats] (the packed row's floats, at most dim / 2).
// Bytes of the queries' split fragments and of the staging area; where the packed rows' raw
// chunk starts without the split.
constexpr size_t FragBytes(int dim) { return static_cast<size_t>(dim / 16) * 3 * 32 * 16; }
constexpr size_t UnsplitRawAt(int dim) {
  return FragBytes(dim) + std::max(StageBytes(dim), PackedKeyBytes(dim));
}
constexpr size_t DynSmem(int dim, bool staged, bool packed, int raw_floats = 0) {
  const size_t frags = FragBytes(dim);
  const size_t stage = StageBytes(dim);
  if (packed && staged) {
    return frags + stage + PackedKeyBytes(dim) + static_cast<size_t>(kChunk) * raw_floats * 4;
  }
  if (packed) return UnsplitRawAt(dim) + static_cast<size_t>(kChunk) * raw_floats * 4;
  return frags + stage + (staged ? static_cast<size_t>(kChunk) * KeyPitch(dim) * 4 : 0);
}

__device__ __forceinline__ float FromBf16(uint32_t b) { return __uint_as_float(b << 16); }

// B fragments (b0, b1) of one P V k step from staged bf16 key rows: keys k0 .. k0 + 15 (rows
// `pitch` bf16 apart, 16-byte aligned), output columns c0 .. c0 + 7, by ldmatrix .x2 .trans: lane
// (g, q) gets column c0 + g of keys k0 + 2q, +1 (b0) and k0 + 8 + 2q, +1 (b1), the lower key in
// the low half (lanes 0..15 give the 16 rows' addresses).
__device__ __forceinline__ void LdmatrixKeysB(const uint16_t* rows, int pitch, int k0, int c0,
                                              int lane, uint32_t& b0, uint32_t& b1) {
  const uint16_t* src = rows + (k0 + lane % 16) * pitch + c0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b0), "=r"(b1)
               : "r"(SmemAddr(src)));
}

// (lo, hi) -> three packed bf16 pairs, part 1 (largest) first; lo in the low half (the lower k).
__device__ __forceinline__ void SplitPair(float lo, float hi, uint32_t (&out)[3]) {
  const uint32_t l1 = Bf16Bits(lo), h1 = Bf16Bits(hi);
  const float lr = lo - FromBf16(l1), hr = hi - FromBf16(h1);  // exact
  const uint32_t l2 = Bf16Bits(lr), h2 = Bf16Bits(hr);
  const uint32_t l3 = Bf16Bits(lr - FromBf16(l2)), h3 = Bf16Bits(hr - FromBf16(h2));  // exact
  out[0] = l1 | (h1 << 16);
  out[1] = l2 | (h2 << 16);
  out[2] = l3 | (h3 << 16);
}

// The six kept part products of one k16 step into d, smallest first (the file comment).
// a[i]: A's part i + 1 fragment (4 registers); b0[j], b1[j]: B's part j + 1.
__device__ __forceinline__ void Mma6(const uint4 (&a)[3], const uint32_t (&b0)[3],
                                     const uint32_t (&b1)[3], float (&d)[4]) {
  MmaBf16(a[2].x, a[2].y, a[2].z, a[2].w, b0[0], b1[0], d);
  MmaBf16(a[1].x, a[1].y, a[1].z, a[1].w, b0[1], b1[1], d);
  MmaBf16(a[0].x, a[0].y, a[0].z, a[0].w, b0[2], b1[2], d);
  MmaBf16(a[1].x, a[1].y, a[1].z, a[1].w, b0[0], b1[0], d);
  MmaBf16(a[0].x, a[0].y, a[0].z, a[0].w, b0[1], b1[1], d);
  MmaBf16(a[0].x, a[0].y, a[0].z, a[0].w, b0[0], b1[0], d);
}

// The same when every B value is a bf16 value (kBf16Kv: the FP8 cache's K=V rows): B's parts 2
// and 3 are exact zeros, so the three products with them are zeros (a zero product added to the
// chain's accumulator leaves its bits: the chain starts at +0 and never holds -0), and the other
// three run in Mma6's order.
template <bool kBf16Kv>
__device__ __forceinline__ void MmaParts(const uint4 (&a)[3], const uint32_t (&b0)[3],
                                         const uint32_t (&b1)[3], float (&d)[4]) {
  if constexpr (kBf16Kv) {
    MmaBf16(a[2].x, a[2].y, a[2].z, a[2].w, b0[0], b1[0], d);
    MmaBf16(a[1].x, a[1].y, a[1].z, a[1].w, b0[0], b1[0], d);
    MmaBf16(a[0].x, a[0].y, a[0].z, a[0].w, b0[0], b1[0], d);
  } else {
    Mma6(a, b0, b1, d);
  }
}

// kSplit false: block (row, tile) folds all of the row's chunks and writes the output; its keys
// come from L2 as the mma steps need them. kSplit true: block (row, tile; chunk blockIdx.y) writes
// its chunk's partial to ws ([row][tile][max_chunks] partials) for the combine kernel; it stages
// the chunk's keys in shared memory first (cp.async, every thread, while the queries are
// prepared). The same values reach the same mma steps either way.
template <bool kSplit, TcKv kKv>
__global__ void __launch_bounds__(kThreads, kSplit ? 1 : 2)
    SparseAttentionTcKernel(SparseAttentionParams p, float* ws, int max_chunks) {
  constexpr bool kBf16Kv = IsBf16Kv(kKv), kPacked = IsPacked(kKv), kQp = IsQp(kKv);
  PdlTrigger();
  PdlWait();
  __shared__ __align__(16) float sc[2][kTile][kSPitch];   // S per dim half, then the weights P
  __shared__ __align__(16) uint4 pf[kChunk / 16][3][32];  // P's split fragments per k step
  __shared__ float fa[kTile], fb[kTile];       // per head: the chunk's fold factors; then 1 / den
  __shared__ const float* kp[2][kChunk];       // the chunk's key rows (null past the end)
  __shared__ float rope_cs[kMaxRopePairs][2];  // the row's RoPE (cos, sin) per pair
  extern __shared__ __align__(16) unsigned char dyn_raw[];
  const int dim = p.dim, kpitch = KeyPitch(dim);
  uint4* const qf = reinterpret_cast<uint4*>(dyn_raw);  // [dim / 16][3][32]
  float* const stage = reinterpret_cast<float*>(dyn_raw + FragBytes(dim));
  float* const keys = stage + kTile * dim;  // kSplit: [kChunk][kpitch]
  // kPacked: the chunk's decoded keys [kChunk][kpitch] bf16 (kSplit: after the staging area; else
  // over it, then the raw rows of the next chunk [kChunk][raw_floats]).
  uint16_t* const kbf = reinterpret_cast<uint16_t*>(kSplit ? keys : stage);
  const int raw_floats = p.kv_format.floats();
  float* const raw =
      reinterpret_cast<float*>(kSplit ? reinterpret_cast<unsigned char*>(keys) + PackedKeyBytes(dim)
                                      : dyn_raw + UnsplitRawAt(dim));

  const int tiles = HeadTiles(p.heads);
  const int64_t t = blockIdx.x / tiles;
  const int h0 = static_cast<int>(blockIdx.x % tiles) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  const RowKeyList list(p, t);
  const int pos = list.pos, n_keys = list.n_keys, n_chunks = list.chunks();
  int c_begin = 0, c_end = n_chunks;
  if constexpr (kSplit) {
    c_begin = static_cast<int>(blockIdx.y);
    c_end = c_begin + 1;
    if (c_begin >= n_chunks) return;  // (uniform over the block; after the wait)
  }

  auto key_ptr = [&](int j) { return list.Row(p, t, j); };
  // The chunk's key rows (null past the row's keys) into kp[buf].
  auto set_keys = [&](int c0, int buf) {
    if (threadIdx.x < kChunk)
      kp[buf][threadIdx.x] = c0 + static_cast<int>(threadIdx.x) < n_keys
                                 ? key_ptr(c0 + static_cast<int>(threadIdx.x))
                                 : nullptr;
  };
  // kPacked: a chunk's keys decoded into kbf as bf16 (exact); row(key): the key's packed row in
  // the raw rows, or null past the end (zeros). Warp w takes keys w, w + 8, ..., lane l their
  // values 4l + 128v .. + 3, whose places in a row (groups[v]) it works out once.
  constexpr int kGroups = kMaxDim / 128;
  PackedGroup4 groups[kGroups];
  if constexpr (kPacked) {
#pragma unroll
    for (int v = 0; v < kGroups; ++v) groups[v] = PackedGroupOf(p.kv_format, 4 * lane + 128 * v);
  }
  auto stage_packed = [&](auto row) {
    for (int key = warp; key < kChunk; key += kWarps) {
      const float* src = row(key);
#pragma unroll
      for (int v = 0; v < kGroups; ++v) {
        const int off = 4 * lane + 128 * v;
        if (off < dim) {
          *reinterpret_cast<uint2*>(kbf + key * kpitch + off) =
              src != nullptr ? PackedLoad4Bf16(src, groups[v]) : make_uint2(0, 0);
        }
      }
    }
  };
  // kPacked: chunk kp[buf]'s raw rows into `raw` (zeros past the end), in flight while other work
  // runs (the first chunk's during the prologue).
  auto prefetch_raw = [&](int buf) {  // warp w keys w, w + 8, ...; lane l words l, l + 32, ...
    for (int key = warp; key < kChunk; key += kWarps) {
      const float* src = kp[buf][key];
      for (int w = lane; w < raw_floats; w += 32)
        CpAsync4(raw + key * raw_floats + w, src != nullptr ? src + w : p.kv, src != nullptr);
    }
    CpAsyncCommit();
  };
  if constexpr (kSplit) {  // the one chunk's keys in flight during the prologue (zeros past the
                           // end)
    set_keys(c_begin * kChunk, 0);
    __syncthreads();
    if constexpr (kPacked) {
      prefetch_raw(0);  // (decoded after the prologue)
    } else {
      for (int c = threadIdx.x; c < kChunk * (dim / 4); c += kThreads) {
        const int key = c / (dim / 4), off = 4 * (c % (dim / 4));
        const float* src = kp[0][key];
        CpAsync16(keys + key * kpitch + off, src != nullptr ? src + off : p.kv, src != nullptr);
      }
      CpAsyncCommit();
    }
  }
  if constexpr (kPacked && !kSplit) {
    set_keys(c_begin * kChunk, 0);
    __syncthreads();
    prefetch_raw(0);
  }

  // Prologue: warp w loads heads h0 + w and h0 + w + 8 (zeros past the last head), with the
  // per-head RMSNorm and RoPE as the CUDA-core kernel computes them (the same operations), into
  // the staging area; then the queries' split fragments.
  RopeTable(pos, p.inv_freq, p.rope_dim / 2, rope_cs);
  __syncthreads();
#pragma unroll 1
  for (int r2 = 0; r2 < 2; ++r2) {
    const int row = warp + 8 * r2;
    StageQuery(p, t, h0 + row, rope_cs, stage + row * dim);
  }
  __syncthreads();
  // Fragment (s, lane): rows g and g + 8 (heads), columns Off(s, q) .. +3; a0 a1 a2 a3 =
  // (row g: cols 0, 1), (row g + 8: 0, 1), (row g: 2, 3), (row g + 8: 2, 3).
  for (int e = threadIdx.x; e < (dim / 16) * 32; e += kThreads) {
    const int s = e / 32, l = e % 32, off = Off(s, l % 4);
    const float4 r0 = *reinterpret_cast<const float4*>(stage + (l / 4) * dim + off);
    const float4 r1 = *reinterpret_cast<const float4*>(stage + (l / 4 + 8) * dim + off);
    if constexpr (kQp) {  // the queries rounded to bf16: part 1 alone
      qf[(s * 3) * 32 + l] = make_uint4(Bf16Pair(r0.x, r0.y), Bf16Pair(r1.x, r1.y),
                                        Bf16Pair(r0.z, r0.w), Bf16Pair(r1.z, r1.w));
      continue;
    }
    uint32_t a0[3], a1[3], a2[3], a3[3];
    SplitPair(r0.x, r0.y, a0);
    SplitPair(r1.x, r1.y, a1);
    SplitPair(r0.z, r0.w, a2);
    SplitPair(r1.z, r1.w, a3);
#pragma unroll
    for (int part = 0; part < 3; ++part)
      qf[(s * 3 + part) * 32 + l] = make_uint4(a0[part], a1[part], a2[part], a3[part]);
  }
  if constexpr (kSplit) CpAsyncWait<0>();
  if constexpr (kSplit && kPacked) {  // the raw rows in: decoded into kbf
    __syncthreads();
    stage_packed([&](int key) {
      return c_begin * kChunk + key < n_keys ? raw + static_cast<int64_t>(key) * raw_floats
                                             : nullptr;
    });
  }
  // (The loop's first __syncthreads orders these writes before the reads.)

  const int nt = dim / (8 * kWarps);  // output n tiles per warp
  const int dbase = warp * (dim / kWarps);
  const int steps_half = dim / 32;  // S's k steps per dim half
  float acc[kMaxNt][4];             // the running output (kSplit: the chunk's P V)
#pragma unroll
  for (int i = 0; i < kMaxNt; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads warp, warp + 8
  float* const part =
      kSplit ? ws + ((t * tiles + blockIdx.x % tiles) * max_chunks + c_begin) * PartFloats(dim)
             : nullptr;

#pragma unroll 1
  for (int ci = c_begin, it = 0; ci < c_end; ++ci, ++it) {
    const int c0 = ci * kChunk;
    const float** const kpb = kp[kSplit ? 0 : it & 1];  // double-buffered: the previous P V
    if constexpr (kPacked && !kSplit) {
      // The chunk's raw rows in (and every thread done with the previous chunk's keys): decoded
      // into kbf; then the next chunk's rows listed and, once `raw` is free, prefetched.
      CpAsyncWait<0>();
      __syncthreads();
      stage_packed([&](int key) {
        return c0 + key < n_keys ? raw + static_cast<int64_t>(key) * raw_floats : nullptr;
      });
      if (ci + 1 < c_end) set_keys(c0 + kChunk, (it + 1) & 1);
      __syncthreads();
      if (ci + 1 < c_end) prefetch_raw((it + 1) & 1);
    } else {
      if constexpr (!kSplit) set_keys(c0, it & 1);
      __syncthreads();
    }
    // S: warp w the n tile w % 4 (the chunk's keys 8 (w % 4) .. +7) over dim half w / 4; lane
    // (g, q) holds key 8 (w % 4) + g's columns.
    {
      const int key = (warp % 4) * 8 + g, hf = warp / 4;
      const float* krow = kSplit ? keys + key * kpitch : kpb[key];
      // Two accumulator chains, even and odd k steps (two mma chains in flight per warp), summed
      // once at the end: a fixed order like the rest. Unrolled 4 (8 key loads in flight per lane;
      // unrolled 2: CSA decode at 32 rows 195 -> 169 us, 8K prefill 22.5 -> 21.8 ms,
      // bench_attention, 64-key chunks).
      float s4[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 4
      for (int s2 = 0; s2 < steps_half; s2 += 2) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int s = hf * steps_half + s2 + u;
          uint32_t b0[3], b1[3];
          if constexpr (kPacked) {  // bf16 values: part 1 is the value, parts 2 and 3 zeros
            const uint2 kb = *reinterpret_cast<const uint2*>(kbf + key * kpitch + Off(s, qd));
            b0[0] = kb.x;
            b1[0] = kb.y;
            b0[1] = b0[2] = b1[1] = b1[2] = 0;
          } else {
            float4 k4;
            if constexpr (kSplit) {
              k4 = *reinterpret_cast<const float4*>(krow + Off(s, qd));
            } else {
              k4 = krow != nullptr ? __ldg(reinterpret_cast<const float4*>(krow + Off(s, qd)))
                                   : make_float4(0, 0, 0, 0);
            }
            if constexpr (kQp) {  // bf16 values: part 1 is the value
              b0[0] = Bf16Pair(k4.x, k4.y);
              b1[0] = Bf16Pair(k4.z, k4.w);
            } else {
              SplitPair(k4.x, k4.y, b0);
              SplitPair(k4.z, k4.w, b1);
            }
          }
          if constexpr (kQp) {  // a1·b1 alone (the other parts are zeros)
            const uint4 a = qf[(s * 3) * 32 + lane];
            MmaBf16(a.x, a.y, a.z, a.w, b0[0], b1[0], s4[u]);
          } else {
            const uint4 a[3] = {qf[(s * 3) * 32 + lane], qf[(s * 3 + 1) * 32 + lane],
                                qf[(s * 3 + 2) * 32 + lane]};
            MmaParts<kBf16Kv>(a, b0, b1, s4[u]);
          }
        }
      }
      // c0, c1: head row g, keys 8 (w % 4) + 2q, +1; c2, c3: row g + 8.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int kc = (warp % 4) * 8 + 2 * qd + (i & 1), row = g + 8 * (i >> 1);
        sc[hf][row][kc] = s4[0][i] + s4[1][i];
      }
    }
    __syncthreads();
    // The chunk's softmax: warp w heads w and w + 8, lane the chunk's key lane: the score is
    // (half 0 + half 1) * scale; its own max (finite: the chunk's first key exists; keys past the
    // end weigh exp(-inf) = 0) and sum; then the fold factors of the running sums (kSplit: the
    // partial's max and sum).
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      const int row = warp + 8 * r2;
      const float z =
          c0 + lane < n_keys ? (sc[0][row][lane] + sc[1][row][lane]) * p.scale : -INFINITY;
      float mc, sum;
      sc[0][row][lane] = ChunkSoftmax(z, &mc, &sum);
      if constexpr (kSplit) {
        if (lane == 0) {
          part[kTile * dim + row] = mc;
          part[kTile * dim + kTile + row] = sum;
        }
      } else {
        FoldRunning(mc, sum, m_run[r2], l_run[r2], &fa[row], &fb[row]);
      }
    }
    __syncthreads();
    // P's split fragments, once per chunk. k step s, lane (g, q): mma k indices 2q, 2q + 1,
    // 2q + 8, 2q + 9 are the keys 16s + 2q, +1, 16s + 8 + 2q, +1 (rows g and g + 8).
    if (threadIdx.x < (kChunk / 16) * 32) {
      const int s = threadIdx.x / 32, l = threadIdx.x % 32, k0 = 16 * s + 2 * (l % 4), r = l / 4;
      if constexpr (kQp) {  // the weights rounded to bf16 (relative to the chunk's max)
        pf[s][0][l] = PFragmentBf16(sc[0], r, k0);
      } else {
        uint32_t a0[3], a1[3], a2[3], a3[3];
        SplitPair(sc[0][r][k0], sc[0][r][k0 + 1], a0);
        SplitPair(sc[0][r + 8][k0], sc[0][r + 8][k0 + 1], a1);
        SplitPair(sc[0][r][k0 + 8], sc[0][r][k0 + 9], a2);
        SplitPair(sc[0][r + 8][k0 + 8], sc[0][r + 8][k0 + 9], a3);
#pragma unroll
        for (int part_i = 0; part_i < 3; ++part_i)
          pf[s][part_i][l] = make_uint4(a0[part_i], a1[part_i], a2[part_i], a3[part_i]);
      }
    }
    __syncthreads();
    // The chunk's P V (warp w's n tiles, each its own chain from zero over the chunk's 2 k steps),
    // folded into the running output (kSplit: kept).
    {
      float a_g = 0.0f, b_g = 0.0f, a_g8 = 0.0f, b_g8 = 0.0f;
      if constexpr (!kSplit) {
        a_g = fa[g];
        b_g = fb[g];
        a_g8 = fa[g + 8];
        b_g8 = fb[g + 8];
      }
#pragma unroll
      for (int i = 0; i < kMaxNt; ++i) {
        if (i < nt) {
          const int d = dbase + 8 * i + g;  // the lane's B column
          float pv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int s = 0; s < kChunk / 16; ++s) {
            uint32_t b0[3], b1[3];
            if constexpr (kPacked) {  // bf16 values: part 1 is the value
              LdmatrixKeysB(kbf, kpitch, 16 * s, dbase + 8 * i, lane, b0[0], b1[0]);
              b0[1] = b0[2] = b1[1] = b1[2] = 0;
            } else {
              float x[4];  // keys 16s + 2q, +1, +8, +9
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const int kc = 16 * s + 2 * qd + (j & 1) + 8 * (j >> 1);
                if constexpr (kSplit) {
                  x[j] = keys[kc * kpitch + d];
                } else {
                  x[j] = kpb[kc] != nullptr ? __ldg(kpb[kc] + d) : 0.0f;
                }
              }
              if constexpr (kQp) {
                b0[0] = Bf16Pair(x[0], x[1]);
                b1[0] = Bf16Pair(x[2], x[3]);
              } else {
                SplitPair(x[0], x[1], b0);
                SplitPair(x[2], x[3], b1);
              }
            }
            if constexpr (kQp) {
              const uint4 a = pf[s][0][lane];
              MmaBf16(a.x, a.y, a.z, a.w, b0[0], b1[0], pv);
            } else {
              const uint4 a[3] = {pf[s][0][lane], pf[s][1][lane], pf[s][2][lane]};
              MmaParts<kBf16Kv>(a, b0, b1, pv);
            }
          }
          if constexpr (kSplit) {
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][c] = pv[c];
          } else {
            FoldPv(acc[i], pv, a_g, b_g, a_g8, b_g8);
          }
        }
      }
    }
  }
  if constexpr (kPacked && !kSplit) CpAsyncWait<0>();  // a row without keys: its first prefetch

  // c0, c1: head row g, output columns dbase + 8i + 2q, +1; c2, c3: row g + 8.
  if constexpr (kSplit) {
#pragma unroll
    for (int i = 0; i < kMaxNt; ++i) {
      if (i < nt) {
        const int c = dbase + 8 * i + 2 * qd;
        *reinterpret_cast<float2*>(part + g * dim + c) = make_float2(acc[i][0], acc[i][1]);
        *reinterpret_cast<float2*>(part + (g + 8) * dim + c) = make_float2(acc[i][2], acc[i][3]);
      }
    }
    return;
  } else {
    // Epilogue: the output factor per head (the sink in the denominator), the scaled output rows
    // into the staging area, then FinishTile. fa is overwritten once every warp has read the last
    // chunk's fold factors from it (a warp past its P V could otherwise get ahead of a slower
    // warp's reads).
    __syncthreads();
    if (lane == 0) {
#pragma unroll
      for (int r2 = 0; r2 < 2; ++r2) {
        const int row = warp + 8 * r2;
        const float sink = h0 + row < p.heads ? p.sink[h0 + row] : 0.0f;
        fa[row] = OutFactor(m_run[r2], l_run[r2], sink);
      }
    }
    __syncthreads();
    const float fg = fa[g], fg8 = fa[g + 8];
#pragma unroll
    for (int i = 0; i < kMaxNt; ++i) {
      if (i < nt) {
        const int c = dbase + 8 * i + 2 * qd;
        *reinterpret_cast<float2*>(stage + g * dim + c) =
            make_float2(__fmul_rn(acc[i][0], fg), __fmul_rn(acc[i][1], fg));
        *reinterpret_cast<float2*>(stage + (g + 8) * dim + c) =
            make_float2(__fmul_rn(acc[i][2], fg8), __fmul_rn(acc[i][3], fg8));
      }
    }
    __syncthreads();
    FinishTile<kWarps>(p, stage, 0, dim, t, h0, rope_cs);
  }
}

// Output column groups of the combine: kCombineCols each where they divide dim (whole act_quant
// blocks, the rope dims in the last group), else one.
__host__ __device__ constexpr int CombineGroups(int dim) {
  return dim % kCombineCols == 0 ? dim / kCombineCols : 1;
}

// The combine's dynamic shared memory: a group's output tile and two floats per head and chunk.
constexpr size_t CombineSmem(int dim, int max_chunks) {
  return (static_cast<size_t>(kTile) * (dim / CombineGroups(dim)) +
          2 * static_cast<size_t>(max_chunks) * kTile) *
         sizeof(float);
}

// Block (row, tile; column group blockIdx.y): the row's chunk partials folded in chunk order (the
// in-block loop's operations on the same values: the fold factors once per head and chunk, then
// per output element), the output factor, then FinishTile on the group's columns.
__global__ void __launch_bounds__(kThreads)
    SparseAttentionTcCombineKernel(SparseAttentionParams p, const float* ws, int max_chunks) {
  PdlTrigger();
  PdlWait();
  __shared__ float fac[kTile];
  __shared__ float rope_cs[kMaxRopePairs][2];  // the row's RoPE (cos, sin) per pair
  extern __shared__ __align__(16) float dyn_c[];
  const int dim = p.dim, cols = dim / static_cast<int>(gridDim.y);
  const int c0 = static_cast<int>(blockIdx.y) * cols;
  float* const stage_c = dyn_c;                   // [kTile][cols]
  float* const fa_c = dyn_c + kTile * cols;       // [max_chunks][kTile]: the chunks' max, then a
  float* const fb_c = fa_c + max_chunks * kTile;  // the chunks' sum, then b
  const int tiles = HeadTiles(p.heads);
  const int64_t t = blockIdx.x / tiles;
  const int h0 = static_cast<int>(blockIdx.x % tiles) * kTile;
  const int pos = p.meta.pos[t];
  const int n_chunks = (RowKeys(p, t, pos) + kChunk - 1) / kChunk;
  RopeTable(pos, p.inv_freq, p.rope_dim / 2, rope_cs);  // (read after the syncs below)
  const int64_t pf_n = PartFloats(dim);
  const float* base = ws + static_cast<int64_t>(blockIdx.x) * max_chunks * pf_n;
  // Each thread's elements 8 at a time, the chunks kChunkBatch at a time: a batch's 64 loads are
  // in flight together, then folded in chunk order (one chunk's loads a round trip before: CSA's
  // 20 chunks took 36 us at one row, ncu c50a). The first batch is loaded before the fold factors
  // below, so its round trip overlaps theirs.
  constexpr int kBatch = 8, kChunkBatch = 8;
  float o[kBatch], v[kChunkBatch][kBatch];
  const float* src[kBatch];
  int row[kBatch];
  const auto start = [&](int e0) {
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int e = min(e0 + k * kThreads, kTile * cols - 1);  // (past the end: computed, unused)
      row[k] = e / cols;
      src[k] = base + row[k] * dim + c0 + e % cols;
      o[k] = 0.0f;
    }
  };
  const auto load = [&](int cb) {
#pragma unroll
    for (int j = 0; j < kChunkBatch; ++j) {
      const int c = max(min(cb + j, n_chunks - 1), 0);  // (past the last: loaded, not folded)
#pragma unroll
      for (int k = 0; k < kBatch; ++k) v[j][k] = src[k][c * pf_n];
    }
  };
  start(threadIdx.x);
  load(0);
  for (int i = threadIdx.x; i < n_chunks * kTile; i += kThreads) {
    const float* pm = base + (i / kTile) * pf_n + kTile * dim + i % kTile;
    fa_c[i] = pm[0];
    fb_c[i] = pm[kTile];
  }
  __syncthreads();
  if (threadIdx.x < kTile) {
    const int row = threadIdx.x;
    float m_run = -INFINITY, l_run = 0.0f;
    for (int c = 0; c < n_chunks; ++c) {
      float m_new, a, b;
      FoldScales(m_run, fa_c[c * kTile + row], &m_new, &a, &b);
      l_run = Fold(l_run, fb_c[c * kTile + row], a, b);
      m_run = m_new;
      fa_c[c * kTile + row] = a;
      fb_c[c * kTile + row] = b;
    }
    const float sink = h0 + row < p.heads ? p.sink[h0 + row] : 0.0f;
    fac[row] = OutFactor(m_run, l_run, sink);
  }
  __syncthreads();
  for (int e0 = threadIdx.x; e0 < kTile * cols; e0 += kBatch * kThreads) {
    if (e0 != static_cast<int>(threadIdx.x)) {
      start(e0);
      load(0);
    }
    for (int cb = 0; cb < n_chunks; cb += kChunkBatch) {
      if (cb > 0) load(cb);
#pragma unroll
      for (int j = 0; j < kChunkBatch; ++j) {
        const int c = cb + j;
        if (c < n_chunks) {
#pragma unroll
          for (int k = 0; k < kBatch; ++k)
            o[k] = Fold(o[k], v[j][k], fa_c[c * kTile + row[k]], fb_c[c * kTile + row[k]]);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int e = e0 + k * kThreads;
      if (e < kTile * cols) stage_c[e] = __fmul_rn(o[k], fac[row[k]]);
    }
  }
  __syncthreads();
  FinishTile<kWarps>(p, stage_c, c0, cols, t, h0, rope_cs);
}

}  // namespace

bool SparseAttentionTcSupports(const SparseAttentionParams& p) {
  return p.heads > 0 && p.dim > 0 && p.dim <= kMaxDim && p.dim % (8 * kWarps) == 0 &&
         p.rope_dim <= 2 * kMaxRopePairs && p.Validate().ok();
}

int64_t SparseAttentionTcMaxChunks(const SparseAttentionParams& p) {
  int64_t keys = p.window_size;
  if (p.rate > 0) keys += p.sel != nullptr ? p.sel_stride : p.comp.capacity;
  return (keys + kChunk - 1) / kChunk;
}

int64_t SparseAttentionTcSplitFloats(const SparseAttentionParams& p) {
  const int64_t tiles = HeadTiles(p.heads);
  return p.meta.n * tiles * SparseAttentionTcMaxChunks(p) * PartFloats(p.dim);
}

// Split when asked, or when the rows' tiles are at most a quarter of the SMs and a row can reach
// 4 chunks or more (bench_attention, H200, 32-key chunks: at 1 row split / unsplit SWA 25 / 43 us,
// CSA 41 / 169, HCA 27 / 50; at 32 rows the split is slower, SWA 65 / 44, HCA 79 / 52: the
// partials' round trip and the combine cost more than the parallelism gains; between 1 and 32
// rows not measured); only where the workspace holds every chunk the rows can reach (the HCA
// entries up to the list's capacity) and the combine's shared memory their fold factors. Never a
// result.
bool SparseAttentionTcWillSplit(const SparseAttentionParams& p) {
  const int64_t blocks = p.meta.n * HeadTiles(p.heads);
  const int64_t max_chunks = SparseAttentionTcMaxChunks(p);
  const bool want =
      p.tc_split > 0 || (p.tc_split == 0 && 4 * blocks <= int64_t{SmCount()} && max_chunks >= 4);
  const bool bounded = p.rate == 0 || p.sel != nullptr || p.comp.capacity > 0;
  return want && bounded && max_chunks > 1 && max_chunks <= kMaxSplitChunks &&
         p.tc_workspace != nullptr && SparseAttentionTcSplitFloats(p) <= p.tc_workspace_floats;
}

namespace {

using TcKernelFn = void (*)(SparseAttentionParams, float*, int);
constexpr TcKv kTcKvs[] = {TcKv::kF32, TcKv::kBf16, TcKv::kPacked, TcKv::kBf16Qp, TcKv::kPackedQp};
template <bool kSplit>
TcKernelFn TcKernelOf(TcKv kv) {
  switch (kv) {
    case TcKv::kF32:
      return SparseAttentionTcKernel<kSplit, TcKv::kF32>;
    case TcKv::kBf16:
      return SparseAttentionTcKernel<kSplit, TcKv::kBf16>;
    case TcKv::kPacked:
      return SparseAttentionTcKernel<kSplit, TcKv::kPacked>;
    case TcKv::kBf16Qp:
      return SparseAttentionTcKernel<kSplit, TcKv::kBf16Qp>;
    case TcKv::kPackedQp:
      return SparseAttentionTcKernel<kSplit, TcKv::kPackedQp>;
  }
  return nullptr;
}
TcKernelFn TcKernel(bool split, TcKv kv) {
  return split ? TcKernelOf<true>(kv) : TcKernelOf<false>(kv);
}
}  // namespace

void LaunchSparseAttentionTc(const SparseAttentionParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  DSINFER_CHECK(SparseAttentionTcSupports(p));  // callers dispatch on it (LaunchSparseAttention)
  static const bool attr_set = [] {
    for (bool split : {false, true}) {
      for (TcKv kv : kTcKvs) {
        CUDA_CHECK(cudaFuncSetAttribute(
            TcKernel(split, kv), cudaFuncAttributeMaxDynamicSharedMemorySize,
            static_cast<int>(DynSmem(kMaxDim, split, IsPacked(kv), kMaxDim / 2))));
      }
    }
    CUDA_CHECK(cudaFuncSetAttribute(SparseAttentionTcCombineKernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(CombineSmem(kMaxDim, kMaxSplitChunks))));
    return true;
  }();
  (void)attr_set;
  const int64_t tiles = HeadTiles(p.heads), blocks = p.meta.n * tiles;
  const int64_t max_chunks = SparseAttentionTcMaxChunks(p);
  if (SparseAttentionTcWillSplit(p)) {
    LaunchKernel(TcKernel(true, TcKvOf(p)),
                 dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(max_chunks)),
                 dim3(kThreads), DynSmem(p.dim, true, p.kv_format.packed(), p.kv_format.floats()),
                 stream, p, p.tc_workspace, static_cast<int>(max_chunks));
    CUDA_CHECK_LAUNCH();
    LaunchKernel(SparseAttentionTcCombineKernel,
                 dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(CombineGroups(p.dim))),
                 dim3(kThreads), CombineSmem(p.dim, static_cast<int>(max_chunks)), stream, p,
                 static_cast<const float*>(p.tc_workspace), static_cast<int>(max_chunks));
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (RowBlockFor(p)) {
    LaunchRowBlock(p, stream);
    return;
  }
  LaunchKernel(TcKernel(false, TcKvOf(p)), dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
               DynSmem(p.dim, false, p.kv_format.packed(), p.kv_format.floats()), stream, p,
               static_cast<float*>(nullptr), 0);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
