// The FP8 cache's tensor-core attention for many rows: the row block (attention_sparse_tc.cuh's
// RowBlockFor / LaunchRowBlock, taken by LaunchSparseAttentionTc; issue 27).
//
// The row block (the FP8 cache's attention: packed K=V rows, qp_bf16; unsplit): one block of
// kRowWarps warps (four warpgroups) per query row for its 64 heads (at most kRowTiles 16-head
// tiles; fewer are padded with zero queries), instead of a block per tile. Each chunk's raw rows
// are fetched and decoded into bf16 keys once per row rather than once per tile (a third of the
// per-tile kernel's instructions went to that, ncu, session 28), the tiles share the block's
// barriers, and the row's first kRowListed key rows are found once, up front, so the chase through
// the selection and the page list is off each chunk's path. S runs on warpgroup MMA: the queries
// (64 heads x dim) and the chunk's keys (32 x dim) sit in shared memory in wgmma's K-major
// 128-byte-swizzled layout, their columns in the order in which the per-tile kernel's mma.sync
// steps take them (S's k step s, k index kk: position 16 s + kk, SPosOfCol), and each wgmma
// k16 step rounds as mma.sync's does (bench/probe_wgmma_bits.cu), so per element the per-tile
// kernel's operations, in its order:
//   S: warpgroup c the chain c of all 64 heads x 32 keys (m64n32k16 over the k steps
//      (c / 2) dim / 32 + c % 2 + 2 j, j < dim / 64: dim half c / 2, even or odd steps), then
//      S = (chain 0 + chain 1) + (chain 2 + chain 3), the per-tile kernel's sum of its two warps'
//      halves of two chains each;
//   softmax: warp w heads w, w + 16, w + 32, w + 48 (lane = the chunk's key), the same steps;
//   P V (mma.sync, B by ldmatrix from the swizzled keys; or, KernelOptions::attention_row_pv_wgmma,
//      warpgroup MMA with B the swizzled keys read N-major, the same chains): warp w the tile w %
//      4's output positions
//      [(w / 4) dim / 4, + dim / 4), each n tile's chain from zero over the chunk's two k steps,
//      folded into the running output; position SPosOfCol(c) holds column c;
// then the output factor and FinishTile on all 64 heads at once. So the bits are the per-tile
// kernel's (checked by gpu_attention_tc_test against it).
//
// The key pre-pass (SparseAttentionParams::keys16, LaunchRowKeysDecode): for a call whose
// sequences all start at position 0, every key a row reads is one of the call's K=V rows or one of
// its sequences' compressed entries, so a kernel of its own decodes each of those once, into bf16
// rows already in S's position order, and the row block (kPre) copies a chunk's keys as they are,
// in 16-byte pieces straight into the swizzled layout (two key buffers, the next chunk's copy
// under this one's math), without the decode pass: the same bf16 values at the same positions,
// so the same bits. Without the decode's registers the kPre form can hold the running softmax
// in shared memory and run P V in m64n32 pieces (the spill-free shape, gpu_run s60's ablation).
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/attention_sparse_tc.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/runtime.h"
#include "backend/cuda/wgmma.cuh"

namespace dsinfer::backend::cuda {
namespace attn_tc {
namespace {

constexpr int kRowTiles = 4;
constexpr int kRowWarps = 16;
constexpr int kRowThreads = kRowWarps * 32;
constexpr int kRowHeads = kRowTiles * kTile;
constexpr int kRowGroups = kRowWarps / kRowTiles;   // P V column groups per tile
constexpr int kRowNt = kMaxDim / (8 * kRowGroups);  // P V n tiles per warp (dim 512: 16)
constexpr int kRowChains = 4;                       // S's chains: one per warpgroup
static_assert(kRowWarps == 4 * kRowChains && kRowHeads == 64, "S: m64 per warpgroup and chain");
constexpr int kRowListed = 1024;  // key rows a row block lists up front (the rest a chunk ahead)
static_assert(kRowListed % kChunk == 0, "listed keys come in whole chunks");
// The pre-decoded form's P V pieces on warpgroup MMA: 32 positions (m64n32, B's start 64 bytes
// into a box for the odd pieces; 64 is the decoding form's m64n64, at the cost of 16 registers).
constexpr int kRowPrePvN = 32;

// S's k order: position p = 16 s + kk of a row holds the column that mma.sync's k index kk of the
// per-tile kernel's step s multiplies (lane quad q = (kk % 8) / 2 takes columns Off(s, q) + 0, 1
// as k 2q, 2q + 1 and Off(s, q) + 2, 3 as k 2q + 8, 2q + 9): column c sits at position
// SPosOfCol(c).
__device__ __forceinline__ int SPosOfCol(int c) {
  const int sub = c % 32;
  const int s = 2 * (c / 32) + (sub / 8) % 2, q = 2 * (sub / 16) + (sub / 4) % 2;
  return 16 * s + 2 * q + 8 * ((c % 4) / 2) + c % 2;
}
// Byte offset of (row r, position p) in a matrix of `rows`-row boxes of 64 positions each (K-major,
// 128-byte swizzle, WgmmaDescSw128's layout).
__device__ __forceinline__ int SwOff(int rows, int r, int p) {
  return (p / 64) * rows * 128 + r * 128 + ((((p % 64) / 8) ^ (r % 8)) * 16) + (p % 8) * 2;
}

// The row block's dynamic shared memory (from a 1024-byte aligned base): the queries [64][dim] and
// the chunk's keys [kChunk][dim] bf16 in the swizzled layout, S's four chains
// [kRowChains][64][kSPitch] fp32 (in the epilogue, all three are the heads' output rows
// [64][dim] fp32) and the next chunk's raw rows [kChunk][raw_floats].
constexpr size_t RowQBytes(int dim) { return static_cast<size_t>(kRowHeads) * dim * 2; }
constexpr size_t RowKBytes(int dim) { return static_cast<size_t>(kChunk) * dim * 2; }
constexpr size_t RowSBytes() { return static_cast<size_t>(kRowChains) * kRowHeads * kSPitch * 4; }
constexpr size_t RowDynSmem(int dim, int raw_floats) {
  return 1024 + RowQBytes(dim) + RowKBytes(dim) + RowSBytes() +
         static_cast<size_t>(kChunk) * raw_floats * 4;
}
// The kPre form's: the queries, two key buffers, S, and the running max and sum per head.
constexpr size_t RowPreDynSmem(int dim) {
  return 1024 + RowQBytes(dim) + 2 * RowKBytes(dim) + RowSBytes() +
         2 * static_cast<size_t>(kRowHeads) * 4;
}
constexpr bool RowOutputFits(int dim) {
  return RowQBytes(dim) + RowKBytes(dim) + RowSBytes() >= static_cast<size_t>(kRowHeads) * dim * 4;
}
static_assert(RowOutputFits(256) && RowOutputFits(512), "the output rows over Q, K and S");

// The row block's prologue (a function of its own: inlined, its registers cost the chunk loop a
// spill): warp w loads heads w, w + 16, w + 32, w + 48 as the per-tile kernel does (LoadQueryWith,
// StageQuery's values) and writes each rounded to bf16 straight into its row of the swizzled
// queries qs, in S's k order: lane l's columns 4 l + 128 v .. + 3 are the pairs at positions
// SPosOfCol(4 l) + 128 v and + 8, as the keys' decode places them. (Through a staging row and a
// second pass, with two block barriers a tile, this was a tenth of the kernel's instructions at a
// SWA layer: ncu, docs/perf.md session 47.)
template <int kDim>
__device__ __noinline__ void StageRowQueries(const SparseAttentionParams& p, int64_t t,
                                             const float (*rope_cs)[2], unsigned char* qs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Head w's offsets of the lane's two pairs; head 16 tile + w's rows are 16 tile rows on (the
  // swizzle's row phase, h % 8 = w % 8, is the same), position + 128 v two boxes on.
  const int qoff0 = SwOff(kRowHeads, warp, SPosOfCol(4 * lane));
  const int qoff1 = SwOff(kRowHeads, warp, SPosOfCol(4 * lane) + 8);
#pragma unroll 1
  for (int tile = 0; tile < kRowTiles; ++tile) {
    const int h = tile * kTile + warp;
    float q[kQueryPerLane];
    LoadQueryWith(p, p.q + (t * p.heads + h) * p.dim, h < p.heads, q,
                  [&](int, int j, float* c, float* s) {
                    *c = rope_cs[j][0];
                    *s = rope_cs[j][1];
                  });
    unsigned char* const qrow = qs + tile * kTile * 128;
#pragma unroll
    for (int v = 0; v < kDim / 128; ++v) {
      *reinterpret_cast<uint32_t*>(qrow + qoff0 + v * 2 * kRowHeads * 128) =
          Bf16Pair(q[4 * v], q[4 * v + 1]);
      *reinterpret_cast<uint32_t*>(qrow + qoff1 + v * 2 * kRowHeads * 128) =
          Bf16Pair(q[4 * v + 2], q[4 * v + 3]);
    }
  }
}

// The row block's FinishTile on all its heads' output rows (out: [kRowHeads][dim], scaled), a
// function of its own like the prologue (inlined, it cost the chunk loop a spill).
__device__ __noinline__ void FinishRow(const SparseAttentionParams& p, float* out, int64_t t,
                                       const float (*rope_cs)[2]) {
  FinishTile<kRowWarps, kRowHeads>(p, out, 0, p.dim, t, 0, rope_cs);
}

// Key j of query row t in the pre-decoded rows p.keys16 (SparseAttentionParams::keys16's
// contract: seg_start 0, so every window position is one of the call's rows): RowKeyList::Row's
// key, bf16 rows of kDim.
template <int kDim>
__device__ __forceinline__ const uint16_t* PreKeyRow(const SparseAttentionParams& p, int64_t t,
                                                     const RowKeyList& list, int j) {
  if (j < list.n_win) {
    const int s = list.pos - list.n_win + 1 + j;
    return p.keys16 + (static_cast<int64_t>(list.seg_begin) + s - list.seg_start) * kDim;
  }
  const int e = p.sel ? p.sel[t * p.sel_stride + (j - list.n_win)] : j - list.n_win;
  return p.keys16 + (p.meta.n + list.seg_begin + e) * kDim;
}

// kDim: head_dim (256 or 512), a template argument so that S's chain of k steps has a fixed trip
// count (with a runtime one ptxas serialized the wgmma steps: C7520). kPvWg: P V on warpgroup MMA
// (KernelOptions::attention_row_pv_wgmma), else on mma.sync. kPre: the keys pre-decoded
// (p.keys16): copied into two alternating key buffers, no decode pass; the running max and sum in
// shared memory, and P V's warpgroup MMA in m64n32 pieces (with the decode's registers gone, that
// is what keeps this form free of spills).
template <int kDim, bool kPvWg, bool kPre = false>
__global__ void __launch_bounds__(kRowThreads, 1)
    SparseAttentionTcRowKernel(const __grid_constant__ SparseAttentionParams p) {
  PdlTrigger();
  PdlWait();
  // A key row: packed, or (kPre) pre-decoded.
  using KeyRow = std::conditional_t<kPre, const uint16_t*, const float*>;
  __shared__ __align__(16) float sc[kRowHeads][kSPitch];          // the weights P
  __shared__ __align__(16) uint4 pf[kRowTiles][kChunk / 16][32];  // P's fragments per tile, step
  __shared__ float fa[kRowHeads], fb[kRowHeads];  // per head: the chunk's fold factors; 1 / den
  __shared__ KeyRow kp[2][kChunk];                // a chunk's key rows past the listed ones
  __shared__ KeyRow kl[kRowListed];               // the row's first kRowListed key rows
  __shared__ float rope_cs[kMaxRopePairs][2];     // the row's RoPE (cos, sin) per pair
  extern __shared__ __align__(16) unsigned char dyn_raw[];
  const int dim = p.dim;  // == kDim (the launch's choice); kept a runtime value outside S's chain,
                          // where a constant one made ptxas unroll past the registers
  unsigned char* const base = AlignSmem1024(dyn_raw);
  unsigned char* const qs = base;                 // queries, swizzled
  unsigned char* const ks = qs + RowQBytes(dim);  // the chunk's keys, swizzled (kPre: buffer 0)
  // kPre: the key buffer 1 (odd chunks) after buffer 0.
  unsigned char* const ks_end = ks + (kPre ? 2 : 1) * RowKBytes(dim);
  float* const s4 = reinterpret_cast<float*>(ks_end);  // [chain][head][kSPitch]
  float* const raw = s4 + kRowChains * kRowHeads * kSPitch;
  const int raw_floats = p.kv_format.floats();
  // kPre: the running max and sum per head (where the raw rows would be).
  float* const m_run_s = raw;
  float* const l_run_s = raw + kRowHeads;

  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  const RowKeyList list(p, t);
  if constexpr (kPre) {
    if (list.seg_start != 0) __trap();  // keys16's contract broken: fail loudly, not silently
  }
  const int pos = list.pos, n_keys = list.n_keys, n_chunks = list.chunks();
  auto key_ptr = [&](int j) -> KeyRow {
    if constexpr (kPre) {
      return PreKeyRow<kDim>(p, t, list, j);
    } else {
      return list.Row(p, t, j);
    }
  };
  // Key rows: the first kRowListed listed once, up front; a later chunk's into kp[buf] a chunk
  // ahead.
  auto set_keys = [&](int c0, int buf) {
    if (threadIdx.x < kChunk) {
      const int j = c0 + static_cast<int>(threadIdx.x);
      kp[buf][threadIdx.x] = j < n_keys ? key_ptr(j) : nullptr;
    }
  };
  auto listed = [&](int c0) { return c0 + kChunk <= kRowListed; };
  auto row_ptr = [&](int c0, int buf, int key) {
    return listed(c0) ? (c0 + key < n_keys ? kl[c0 + key] : nullptr) : kp[buf][key];
  };
  constexpr int kGroups = kMaxDim / 128;
  PackedGroup4 groups[kGroups];
#pragma unroll
  for (int v = 0; v < kGroups; ++v) groups[v] = PackedGroupOf(p.kv_format, 4 * lane + 128 * v);
  // A key's raw row by 8-byte copies where the row and its place allow (an even row length, an
  // 8-byte aligned row: the FP8 cache's rows of 146 floats), else 4-byte ones.
  // kPre: a key's pre-decoded row (kDim bf16 in S's position order) into key buffer buf % 2 by
  // 16-byte pieces, piece i (positions 8 i .. + 7) at its swizzled place; past the row's keys,
  // zeros (as the decode writes them).
  auto prefetch_raw = [&](int c0, int buf) {
    if constexpr (kPre) {
      unsigned char* const kb = ks + (buf & 1) * RowKBytes(kDim);
      for (int key = warp; key < kChunk; key += kRowWarps) {
        const uint16_t* src = row_ptr(c0, buf, key);
        for (int piece = lane; piece < kDim / 8; piece += 32)
          CpAsync16(kb + SwOff(kChunk, key, piece * 8), src != nullptr ? src + piece * 8 : p.keys16,
                    src != nullptr);
      }
    } else {
      for (int key = warp; key < kChunk; key += kRowWarps) {
        const float* src = row_ptr(c0, buf, key);
        float* const dst = raw + key * raw_floats;
        if (raw_floats % 2 == 0 && (reinterpret_cast<uintptr_t>(src) & 7) == 0) {
          for (int w = 2 * lane; w < raw_floats; w += 64)
            CpAsync8(dst + w, src != nullptr ? src + w : p.kv, src != nullptr);
        } else {
          for (int w = lane; w < raw_floats; w += 32)
            CpAsync4(dst + w, src != nullptr ? src + w : p.kv, src != nullptr);
        }
      }
    }
    CpAsyncCommit();
  };
  for (int j = threadIdx.x; j < min(n_keys, kRowListed); j += kRowThreads) kl[j] = key_ptr(j);
  if (!listed(0)) set_keys(0, 0);
  if constexpr (kPre) {
    if (threadIdx.x < kRowHeads) {
      m_run_s[threadIdx.x] = -INFINITY;
      l_run_s[threadIdx.x] = 0.0f;
    }
  }
  RopeTable(pos, p.inv_freq, p.rope_dim / 2, rope_cs);
  __syncthreads();
  prefetch_raw(0, 0);

  // Prologue: the queries, swizzled (StageRowQueries); the barrier publishes them to every warp,
  // the first chunk's proxy fence to wgmma.
  StageRowQueries<kDim>(p, t, rope_cs, qs);
  __syncthreads();

  const int ptile = warp % kRowTiles;  // P V: tile, positions
  const int nt = dim / (8 * kRowGroups);
  const int dbase = (warp / kRowTiles) * (dim / kRowGroups);
  const int chain = warp / 4, wq = warp % 4;  // S: the warpgroup's chain; the warp's 16 heads
  float acc[kRowNt][4];
#pragma unroll
  for (int i = 0; i < kRowNt; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
  constexpr int kSoftRows = kRowHeads / kRowWarps;  // heads per warp in the softmax
  float m_run[kSoftRows], l_run[kSoftRows];
#pragma unroll
  for (int r = 0; r < kSoftRows; ++r) {
    m_run[r] = -INFINITY;
    l_run[r] = 0.0f;
  }
  const uint32_t qa = SmemAddr(qs), ka0 = SmemAddr(ks);
  // The decode's key-row offsets of the lane's first column pairs (key `warp`; see below).
  const int key_off0 = SwOff(kChunk, warp, SPosOfCol(4 * lane));
  const int key_off1 = SwOff(kChunk, warp, SPosOfCol(4 * lane) + 8);

#pragma unroll 1
  for (int ci = 0, it = 0; ci < n_chunks; ++ci, ++it) {
    const int c0 = ci * kChunk;
    // The chunk's raw rows in (and every thread done with the previous chunk's keys): decoded
    // into the swizzled key rows; then the next chunk's rows listed and, once `raw` is free,
    // prefetched. kPre: the chunk's keys are in key buffer it % 2 as they are (no decode); the
    // barrier below also tells that every thread is done with the other buffer (the previous
    // chunk's), which the next chunk's copy then fills.
    CpAsyncWait<0>();
    if constexpr (!kPre) {
      __syncthreads();
      // Lane l's columns 4 l + 128 v .. + 3 sit at positions SPosOfCol(4 l) + 128 v (and + 8 for
      // the second pair): two boxes on per v.
      for (int key = warp; key < kChunk; key += kRowWarps) {
        const float* src =
            c0 + key < n_keys ? raw + static_cast<int64_t>(key) * raw_floats : nullptr;
        unsigned char* const krow = ks + (key - warp) * 128;  // key % 8 == warp % 8
#pragma unroll
        for (int v = 0; v < kGroups; ++v) {
          if (4 * lane + 128 * v < kDim) {  // (v < kDim / 128: no test)
            const uint2 kv4 = src != nullptr ? PackedLoad4Bf16(src, groups[v]) : make_uint2(0, 0);
            *reinterpret_cast<uint32_t*>(krow + key_off0 + v * 2 * kChunk * 128) = kv4.x;
            *reinterpret_cast<uint32_t*>(krow + key_off1 + v * 2 * kChunk * 128) = kv4.y;
          }
        }
      }
    }
    FenceProxyAsync();  // the key rows (and, the first time, the queries) for wgmma's reads
    if (ci + 1 < n_chunks && !listed(c0 + kChunk)) set_keys(c0 + kChunk, (it + 1) & 1);
    __syncthreads();
    const uint32_t ka = kPre ? ka0 + (it & 1) * static_cast<uint32_t>(RowKBytes(kDim)) : ka0;
    if (ci + 1 < n_chunks) prefetch_raw(c0 + kChunk, (it + 1) & 1);
    // S: warpgroup `chain` its chain over all 64 heads and the chunk's 32 keys.
    {
      float sa[kChunk / 2];
#pragma unroll
      for (int i = 0; i < kChunk / 2; ++i) sa[i] = 0.0f;
      // Step s = (chain / 2) kStepsHalf + chain % 2 + 2 j lies in box s / 4 = the half's first box
      // + j / 2, at k16 offset s % 4 = chain % 2 + 2 (j % 2): one descriptor per operand, the
      // steps' offsets added to its address field (16-byte units; shared addresses < 256 KB).
      constexpr int kStepsHalf = kDim / 32;
      const uint32_t box = (chain / 2) * (kStepsHalf / 4), k16 = (chain % 2) * 32u;
      const uint64_t da = WgmmaDescSw128(qa + box * kRowHeads * 128u + k16),
                     db = WgmmaDescSw128(ka + box * kChunk * 128u + k16);
      WgmmaFence();
#pragma unroll
      for (int j = 0; j < kStepsHalf / 2; ++j) {
        WgmmaSsBf16<kChunk>(sa, da + (((j / 2) * kRowHeads * 128 + (j % 2) * 64) >> 4),
                            db + (((j / 2) * kChunk * 128 + (j % 2) * 64) >> 4), 1);
      }
      WgmmaCommit();
      WgmmaWait<0>();
      WgmmaFenceOperand(sa);
      // sa[4 j + i]: head 16 wq + g + 8 (i / 2), key 8 j + 2 q + i % 2.
      float* const out = s4 + chain * kRowHeads * kSPitch;
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          out[(16 * wq + g + 8 * (i / 2)) * kSPitch + 8 * j + 2 * qd + i % 2] = sa[4 * j + i];
    }
    __syncthreads();
    // The chunk's softmax, as the per-tile kernel's, for the warp's heads.
#pragma unroll
    for (int r = 0; r < kSoftRows; ++r) {
      const int row = warp + kRowWarps * r;
      const float* sr = s4 + row * kSPitch + lane;
      const float h0s = sr[0] + sr[kRowHeads * kSPitch];
      const float h1s = sr[2 * kRowHeads * kSPitch] + sr[3 * kRowHeads * kSPitch];
      const float z = c0 + lane < n_keys ? (h0s + h1s) * p.scale : -INFINITY;
      float mc, sum;
      sc[row][lane] = ChunkSoftmax(z, &mc, &sum);
      if constexpr (kPre) {
        // The same fold on the head's running max and sum kept in shared memory (every lane
        // reads them before lane 0 writes the new ones).
        float m_r = m_run_s[row], l_r = l_run_s[row];
        FoldRunning(mc, sum, m_r, l_r, &fa[row], &fb[row]);
        __syncwarp();
        if (lane == 0) {
          m_run_s[row] = m_r;
          l_run_s[row] = l_r;
        }
      } else {
        FoldRunning(mc, sum, m_run[r], l_run[r], &fa[row], &fb[row]);
      }
    }
    __syncthreads();
    // P's fragments (bf16, relative to the chunk's max) per tile and k step.
    if (threadIdx.x < kRowTiles * (kChunk / 16) * 32) {
      const int tile = threadIdx.x / ((kChunk / 16) * 32), s = (threadIdx.x / 32) % (kChunk / 16);
      const int l = threadIdx.x % 32, k0 = 16 * s + 2 * (l % 4), r = tile * kTile + l / 4;
      pf[tile][s][l] = PFragmentBf16(sc, r, k0);
    }
    __syncthreads();
    const int hg = ptile * kTile + g;
    const float a_g = fa[hg], b_g = fb[hg], a_g8 = fa[hg + 8], b_g8 = fb[hg + 8];
    if constexpr (kPvWg) {
      // The chunk's P V on warpgroup MMA, folded into the running output: warpgroup w / 4 the
      // positions [dbase, dbase + dim / 4) of all 64 heads (warp w's rows: tile w % 4 = ptile, A
      // its P fragments), in pieces of 64 positions, each m64n64k16 over the chunk's two k steps
      // from zero (the mma.sync chain's operations: the wgmma probe's wgmma_t_vs_mma); B the
      // swizzled key rows read N-major (keys 16 s .. + 15 of 64 positions a box: the boxes of the
      // position-major layout S reads K-major). The accumulator's n8 tile j of a piece is the
      // mma.sync path's tile 8 piece + j. kPre: pieces of kRowPrePvN = 32 positions (m64n32k16,
      // B from the box's half at byte 64 (piece % 2)), tile j of a piece the mma.sync path's
      // 4 piece + j: the same chains on fewer accumulators.
      constexpr int kPieceN = kPre ? kRowPrePvN : 64;
      constexpr int kPieces = kDim / kRowGroups / kPieceN;
      uint32_t af[kChunk / 16][4];
#pragma unroll
      for (int st = 0; st < kChunk / 16; ++st) {
        const uint4 a = pf[ptile][st][lane];
        af[st][0] = a.x;
        af[st][1] = a.y;
        af[st][2] = a.z;
        af[st][3] = a.w;
      }
      const uint32_t b_base = ka + (dbase / 64) * kChunk * 128;
#pragma unroll
      for (int piece = 0; piece < kPieces; ++piece) {
        float pv[kPieceN / 2];
#pragma unroll
        for (int e = 0; e < kPieceN / 2; ++e) pv[e] = 0.0f;
        // The piece's first position from b_base: box (kPieceN piece) / 64, byte 2 ((kPieceN
        // piece) % 64). (The m64n64 form's offset written as it was: another expression of the
        // same value changed its code.)
        const int piece_off =
            kPieceN == 64 ? piece * kChunk * 128
                          : (kPieceN * piece / 64) * kChunk * 128 + ((kPieceN * piece) % 64) * 2;
        WgmmaFence();
#pragma unroll
        for (int st = 0; st < kChunk / 16; ++st) {
          Wgmma<kPieceN, true, true>(
              pv, af[st], WgmmaDescMnSw128(b_base + piece_off + st * 16 * 128, kChunk * 128), 1);
        }
        WgmmaCommit();
        WgmmaWait<0>();
        WgmmaFenceOperand(pv);
        WgmmaFenceOperand(af);
#pragma unroll
        for (int jt = 0; jt < kPieceN / 8; ++jt) {
          const float part[4] = {pv[4 * jt], pv[4 * jt + 1], pv[4 * jt + 2], pv[4 * jt + 3]};
          FoldPv(acc[(kPieceN / 8) * piece + jt], part, a_g, b_g, a_g8, b_g8);
        }
      }
    } else {
      // The chunk's P V, folded into the running output. B: ldmatrix .x2 .trans of the swizzled
      // key rows 16 s .. + 15 at positions dbase + 8 i .. + 7 (lanes 0 .. 15 give the rows): with
      // dbase a multiple of 64 (dim % 256 == 0), box dbase / 64 + i / 8, chunk i % 8, so the row's
      // swizzled chunk is (i % 8) ^ (row % 8), row % 8 = lane % 8.
      {
        const uint32_t pv_base =
            ka + (lane % 16) * 128 + (lane % 8) * 16 + (dbase / 64) * kChunk * 128;
#pragma unroll
        for (int i = 0; i < kRowNt; ++i) {
          if (i < nt) {
            float pv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int s = 0; s < kChunk / 16; ++s) {
              uint32_t b0, b1;
              asm volatile(
                  "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                  : "=r"(b0), "=r"(b1)
                  : "r"((pv_base + s * 16 * 128 + (i / 8) * kChunk * 128) ^ ((i % 8) * 16)));
              const uint4 a = pf[ptile][s][lane];
              MmaBf16(a.x, a.y, a.z, a.w, b0, b1, pv);
            }
            FoldPv(acc[i], pv, a_g, b_g, a_g8, b_g8);
          }
        }
      }
    }
  }
  CpAsyncWait<0>();  // a row without keys: its first prefetch

  // Epilogue: the output factor per head, then all 64 heads' scaled output rows into one staging
  // area (position -> column) over the queries, keys and scores, which the chunks no longer need,
  // and FinishTile on them at once (fa is overwritten once every warp has read the last fold
  // factors). (Tile by tile through a 16-row staging area, with three block barriers a tile and
  // a quarter of the warps writing, it was a sixth of the kernel's instructions at a SWA layer:
  // ncu, docs/perf.md session 47.)
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kSoftRows; ++r) {
      const int row = warp + kRowWarps * r;
      const float m = kPre ? m_run_s[row] : m_run[r], l = kPre ? l_run_s[row] : l_run[r];
      fa[row] = OutFactor(m, l, row < p.heads ? p.sink[row] : 0.0f);
    }
  }
  __syncthreads();
  float* const out_stage = reinterpret_cast<float*>(qs);  // [kRowHeads][dim]
  {
    const int hg = ptile * kTile + g;
    const float fg = fa[hg], fg8 = fa[hg + 8];
#pragma unroll
    for (int i = 0; i < kRowNt; ++i) {
      if (i < nt) {
        // The column at position dbase + 8 i + 2 q (dbase % 64 == 0), and c + 1 at the next.
        const int c =
            dbase + 32 * (i / 4) + 8 * ((i / 2) % 2) + 2 * (i % 2) + 16 * (qd / 2) + 4 * (qd % 2);
        *reinterpret_cast<float2*>(out_stage + hg * dim + c) =
            make_float2(__fmul_rn(acc[i][0], fg), __fmul_rn(acc[i][1], fg));
        *reinterpret_cast<float2*>(out_stage + (hg + 8) * dim + c) =
            make_float2(__fmul_rn(acc[i][2], fg8), __fmul_rn(acc[i][3], fg8));
      }
    }
  }
  __syncthreads();
  FinishRow(p, out_stage, t, rope_cs);
}

// The key pre-pass (SparseAttentionParams::keys16): warp w of a block the batch row r = 8 block +
// w: its K=V row into keys16 row r and, with compressed entries, the entry e = r - seg_begin of its
// sequence (if its last row sees it) into row n + r = n + seg_begin + e, each as the row block's
// decode writes a key row, by position: lane l's columns 4 l + 128 v .. + 3 (PackedLoad4Bf16's two
// bf16 pairs) at positions SPosOfCol(4 l) + 128 v and + 8 (SPosOfCol(c + 1) = SPosOfCol(c) + 1,
// SPosOfCol(c + 2) = SPosOfCol(c) + 8 for c % 4 == 0).
constexpr int kKeysDecodeWarps = 8;
__global__ void __launch_bounds__(kKeysDecodeWarps * 32)
    RowKeysDecodeKernel(const __grid_constant__ SparseAttentionParams p, uint16_t* keys16) {
  PdlTrigger();
  PdlWait();
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kKeysDecodeWarps + threadIdx.x / 32;
  if (r >= p.meta.n) return;
  const int dim = p.dim;
  auto decode = [&](const float* src, uint16_t* dst) {
    const int at = SPosOfCol(4 * lane);
    for (int v = 0; 4 * lane + 128 * v < dim; ++v) {
      const uint2 kv4 = PackedLoad4Bf16(src, PackedGroupOf(p.kv_format, 4 * lane + 128 * v));
      *reinterpret_cast<uint32_t*>(dst + at + 128 * v) = kv4.x;
      *reinterpret_cast<uint32_t*>(dst + at + 128 * v + 8) = kv4.y;
    }
  };
  decode(p.kv + r * p.kv_row_floats(), keys16 + r * dim);
  if (p.rate > 0) {
    const int begin = p.meta.seg_begin[r];
    const int last = begin + p.meta.seg_count[r] - 1;
    const int e = static_cast<int>(r) - begin, cnt = (p.meta.pos[last] + 1) / p.rate;
    if (e < cnt) decode(p.comp.Entry(p.meta.slot[r], e), keys16 + (p.meta.n + r) * dim);
  }
}

std::atomic<int64_t> row_launches{0};
std::atomic<int64_t> row_prepass_launches{0};

}  // namespace

bool RowBlockFor(const SparseAttentionParams& p) {
  if (TcKvOf(p) != TcKv::kPackedQp || HeadTiles(p.heads) > kRowTiles ||
      (p.dim != 256 && p.dim != 512) || p.tc_row < 0)
    return false;
  if (p.tc_row > 0) return true;
  const int64_t min_rows = GetKernelOptions().attention_tc_row_min_rows;
  return HeadTiles(p.heads) == kRowTiles && min_rows > 0 && p.meta.n >= min_rows;
}

void LaunchRowBlock(const SparseAttentionParams& p, StreamHandle stream) {
  static const bool attr_set = [] {
    for (auto* kernel :
         {SparseAttentionTcRowKernel<256, false>, SparseAttentionTcRowKernel<256, true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(RowDynSmem(256, 128))));
    }
    for (auto* kernel :
         {SparseAttentionTcRowKernel<512, false>, SparseAttentionTcRowKernel<512, true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(RowDynSmem(512, 256))));
    }
    for (auto* kernel : {SparseAttentionTcRowKernel<256, false, true>,
                         SparseAttentionTcRowKernel<256, true, true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(RowPreDynSmem(256))));
    }
    for (auto* kernel : {SparseAttentionTcRowKernel<512, false, true>,
                         SparseAttentionTcRowKernel<512, true, true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(RowPreDynSmem(512))));
    }
    return true;
  }();
  (void)attr_set;
  DSINFER_CHECK(p.dim == 256 || p.dim == 512);  // RowBlockFor
  const bool wg = GetKernelOptions().attention_row_pv_wgmma;
  if (p.keys16 != nullptr) {
    auto* kernel = p.dim == 256 ? (wg ? SparseAttentionTcRowKernel<256, true, true>
                                      : SparseAttentionTcRowKernel<256, false, true>)
                                : (wg ? SparseAttentionTcRowKernel<512, true, true>
                                      : SparseAttentionTcRowKernel<512, false, true>);
    LaunchKernel(kernel, dim3(static_cast<unsigned>(p.meta.n)), dim3(kRowThreads),
                 RowPreDynSmem(p.dim), stream, p);
    CUDA_CHECK_LAUNCH();
    ++row_launches;
    ++row_prepass_launches;
    return;
  }
  auto* kernel =
      p.dim == 256
          ? (wg ? SparseAttentionTcRowKernel<256, true> : SparseAttentionTcRowKernel<256, false>)
          : (wg ? SparseAttentionTcRowKernel<512, true> : SparseAttentionTcRowKernel<512, false>);
  LaunchKernel(kernel, dim3(static_cast<unsigned>(p.meta.n)), dim3(kRowThreads),
               RowDynSmem(p.dim, p.kv_format.floats()), stream, p);
  CUDA_CHECK_LAUNCH();
  ++row_launches;
}

}  // namespace attn_tc

int64_t SparseAttentionTcRowLaunches() { return attn_tc::row_launches.load(); }
int64_t SparseAttentionTcRowPrepassLaunches() { return attn_tc::row_prepass_launches.load(); }

bool SparseAttentionTakesRowBlock(const SparseAttentionParams& p) {
  // LaunchSparseAttention's choice for qp_bf16 (the tensor-core kernel), then
  // LaunchSparseAttentionTc's (unsplit rows, RowBlockFor).
  return p.meta.n > 0 && p.qp_bf16 && SparseAttentionTcSupports(p) &&
         !SparseAttentionTcWillSplit(p) && attn_tc::RowBlockFor(p);
}

void LaunchRowKeysDecode(const SparseAttentionParams& p, uint16_t* keys16, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK(attn_tc::TcKvOf(p) == attn_tc::TcKv::kPackedQp && p.dim % 128 == 0 &&
                p.dim <= attn_tc::kMaxDim);
  const auto blocks =
      static_cast<unsigned>((p.meta.n + attn_tc::kKeysDecodeWarps - 1) / attn_tc::kKeysDecodeWarps);
  LaunchKernel(attn_tc::RowKeysDecodeKernel, dim3(blocks), dim3(attn_tc::kKeysDecodeWarps * 32), 0,
               stream, p, keys16);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
