// Internal to backend/cuda: what the tensor-core sparse attention's kernels share — the per-tile
// kernel, its split and combine (attention_sparse_tc_sm90.cu) and the FP8 cache's row block
// (attention_sparse_tc_row_sm90.cu): the chunking, S's k order, the bf16 rounding, the row's key
// list, the query staging, the chunk softmax and its fold, the P fragments, the epilogue. Every
// kernel computes an element through these, so their bits agree.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention_query.cuh"
#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/qlinear_core.cuh"
#include "backend/softmax_fold.h"

namespace dsinfer::backend::cuda::attn_tc {

constexpr int kTile = 16;   // heads per block: one mma m tile
constexpr int kChunk = 32;  // keys per step: 4 n tiles of 8, each over 2 dim halves
static_assert(kChunk == softmax::kChunk, "the chunks qp_bf16 rounds P in are the CPU's");
constexpr int kSPitch = kChunk + 4;  // floats per score row
constexpr int kMaxDim = 512;

// Bytes of a [kTile][dim] fp32 staging area (a tile's queries in the prologue, its output in the
// epilogue).
constexpr size_t StageBytes(int dim) { return static_cast<size_t>(kTile) * dim * 4; }

__device__ __forceinline__ uint32_t Bf16Bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
// (lo, hi) rounded to bf16 as one packed pair (SplitPair's part 1), lo in the low half.
__device__ __forceinline__ uint32_t Bf16Pair(float lo, float hi) {
  return Bf16Bits(lo) | (Bf16Bits(hi) << 16);
}

// The first of the 4 columns lane quad q takes in S's k step s (pairs of steps cover 32 columns).
__device__ __forceinline__ int Off(int s, int q) {
  return 32 * (s >> 1) + 8 * (s & 1) + 16 * (q >> 1) + 4 * (q & 1);
}

// The fold of one chunk's partial softmax (its own max, its sum of exp(z - max), its P V) into the
// running one: backend/softmax_fold.h's FoldScales / Fold / OutFactor, shared with the CPU's
// AttendHeadBf16. The in-block chunk loop and the combine kernel both call them on the same
// values in the same chunk order, so a row's chunks give the same bits in one block or in one
// block each.
using softmax::Fold;
using softmax::FoldScales;
using softmax::OutFactor;

// The K=V rows' variants (and with them the queries' and weights' precision): fp32 values, bf16
// values in fp32 rows (kv_bf16), packed rows (kv_format, bf16 values); the last two also with
// bf16 queries and weights (qp_bf16).
enum class TcKv { kF32, kBf16, kPacked, kBf16Qp, kPackedQp };
constexpr bool IsBf16Kv(TcKv kv) { return kv != TcKv::kF32; }
constexpr bool IsPacked(TcKv kv) { return kv == TcKv::kPacked || kv == TcKv::kPackedQp; }
constexpr bool IsQp(TcKv kv) { return kv == TcKv::kBf16Qp || kv == TcKv::kPackedQp; }
// The variant of a call's rows.
inline TcKv TcKvOf(const SparseAttentionParams& p) {
  if (p.kv_format.packed()) return p.qp_bf16 ? TcKv::kPackedQp : TcKv::kPacked;
  if (p.kv_bf16) return p.qp_bf16 ? TcKv::kBf16Qp : TcKv::kBf16;
  return TcKv::kF32;  // (qp_bf16 needs kv_bf16: Validate)
}

// Row t's key count (its window, then its compressed entries), as the CUDA-core kernel lists them.
__device__ __forceinline__ int RowKeys(const SparseAttentionParams& p, int64_t t, int pos) {
  const int n_win = min(p.window_size, pos + 1);
  int n_comp = 0;
  if (p.rate > 0) n_comp = p.sel ? p.sel_count[t] : (pos + 1) / p.rate;
  return n_win + n_comp;
}

// A query row's key list (its window, then its compressed entries, as the CUDA-core kernel lists
// them) and where its key j's row is.
struct RowKeyList {
  int pos, slot, seg_start, seg_begin, n_win, n_keys;
  const float* window;  // the sequence's ring (null without window keys)
  __device__ __forceinline__ RowKeyList(const SparseAttentionParams& p, int64_t t)
      : pos(p.meta.pos[t]),
        slot(p.meta.slot[t]),
        seg_start(p.meta.seg_start[t]),
        seg_begin(p.meta.seg_begin[t]),
        n_win(min(p.window_size, pos + 1)),
        n_keys(RowKeys(p, t, pos)),
        window(n_win > 0 ? p.window.Base(slot) : nullptr) {}
  __device__ __forceinline__ int chunks() const { return (n_keys + kChunk - 1) / kChunk; }
  __device__ __forceinline__ const float* Row(const SparseAttentionParams& p, int64_t t,
                                              int j) const {
    return KeyRowPtr(p, t, j, pos, n_win, slot, seg_start, seg_begin, window);
  }
};

// Blocks per query row: tiles of 16 heads, the last one padded.
__host__ __device__ constexpr int HeadTiles(int heads) { return (heads + kTile - 1) / kTile; }

// The epilogue on output columns [c0, c0 + cols) of kRows heads from h0 (a tile, or the row
// block's four), in `stage` ([kRows][cols], already scaled by OutFactor): the inverse RoPE of the
// trailing rope dims (rope_cs: the row's table, RopeTable), the output rows and their optional
// act_quant (cols a multiple of 128 or the whole dim: whole act_quant blocks).
template <int kNWarps, int kRows = kTile>
__device__ __forceinline__ void FinishTile(const SparseAttentionParams& p, float* stage, int c0,
                                           int cols, int64_t t, int h0, const float (*rope_cs)[2]) {
  constexpr int kNThreads = kNWarps * 32;
  const int dim = p.dim, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = p.rope_dim / 2, roff = dim - p.rope_dim;
  for (int i = threadIdx.x; i < kRows * half; i += kNThreads) {
    const int row = i / half, col = roff + 2 * (i % half);
    if (col >= c0 && col < c0 + cols) {
      float* r = stage + row * cols + col - c0;
      RotateWith(r[0], r[1], rope_cs[i % half][0], rope_cs[i % half][1], true);
    }
  }
  __syncthreads();
  const int rows = min(kRows, p.heads - h0);
  if (p.out_c == nullptr) {
    for (int i = threadIdx.x; i < rows * (cols / 4); i += kNThreads) {
      const int row = i / (cols / 4), c = 4 * (i % (cols / 4));
      *reinterpret_cast<float4*>(p.out + (t * p.heads + h0 + row) * dim + c0 + c) =
          *reinterpret_cast<const float4*>(stage + row * cols + c);
    }
  }
  const int blocks = cols / qcore::kQb;
  if (p.out_q != nullptr) {  // (row, block b) per warp: act_quant block b of head h0 + row
    for (int task = warp; task < rows * blocks; task += kNWarps) {
      const int row = task / blocks, c = (task % blocks) * qcore::kQb + 4 * lane;
      float s;
      const uint2 qv =
          qcore::QuantBlock(*reinterpret_cast<const float4*>(stage + row * cols + c), &s);
      const int64_t col = static_cast<int64_t>(h0 + row) * dim + c0 + c;
      *reinterpret_cast<uint2*>(p.out_q + t * p.out_ldq + col) = qv;
      if (lane == 0) p.out_s[t * p.out_lds + col / qcore::kQb] = s;
    }
  }
  if (p.out_c != nullptr) {  // four (row, block) a warp, 8 lanes each (QuantBlockCodes16)
    const int tasks = rows * blocks, sub = lane / 8, l8 = lane % 8;
    for (int task0 = 4 * warp; task0 < tasks; task0 += 4 * kNWarps) {
      const int task = task0 + sub;
      const bool ok = task < tasks;
      const int row = ok ? task / blocks : 0, c = (ok ? task % blocks : 0) * qcore::kQb + 16 * l8;
      float4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        v[k] = ok ? *reinterpret_cast<const float4*>(stage + row * cols + c + 4 * k)
                  : make_float4(0.f, 0.f, 0.f, 0.f);
      float s;
      const uint4 codes = qcore::QuantBlockCodes16(v, &s);
      if (ok) {
        const int64_t col = static_cast<int64_t>(h0 + row) * dim + c0 + c;
        *reinterpret_cast<uint4*>(p.out_c + t * p.out_ldc + col) = codes;
        if (l8 == 0) p.out_cs[(col / qcore::kQb) * p.out_ldcs + t] = s;
      }
    }
  }
}

// Head h's query as the CUDA-core kernel computes it (RMSNorm, RoPE from the row's table
// rope_cs, RopeTable; zeros when absent) into a staging row of dim floats, by one warp.
__device__ __forceinline__ void StageQuery(const SparseAttentionParams& p, int64_t t, int h,
                                           const float (*rope_cs)[2], float* row) {
  const int lane = threadIdx.x % 32;
  float q[kQueryPerLane];
  LoadQueryWith(p, p.q + (t * p.heads + h) * p.dim, h < p.heads, q,
                [&](int, int j, float* c, float* s) {
                  *c = rope_cs[j][0];
                  *s = rope_cs[j][1];
                });
#pragma unroll
  for (int v = 0; v < kQueryPerLane / 4; ++v) {
    const int c = 4 * lane + 128 * v;
    if (c < p.dim)
      *reinterpret_cast<float4*>(row + c) =
          make_float4(q[4 * v], q[4 * v + 1], q[4 * v + 2], q[4 * v + 3]);
  }
}

// One head's chunk softmax by one warp, lane = the chunk's key with score z (-inf past the row's
// keys): the chunk's own max mc and sum of e = exp(z - mc) (butterflies over the 32 lanes, every
// lane ending with the same values); returns the lane's e.
__device__ __forceinline__ float ChunkSoftmax(float z, float* mc, float* sum) {
  float m = z;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  const float e = expf(z - m);
  float s = e;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  *mc = m;
  *sum = s;
  return e;
}

// A head's chunk (its max mc and sum) folded into the running max and sum; lane 0 stores the
// fold factors a, b of the running output for the block's P V.
__device__ __forceinline__ void FoldRunning(float mc, float sum, float& m_run, float& l_run,
                                            float* fa, float* fb) {
  float m_new, a, b;
  FoldScales(m_run, mc, &m_new, &a, &b);
  l_run = Fold(l_run, sum, a, b);
  m_run = m_new;
  if (threadIdx.x % 32 == 0) {
    *fa = a;
    *fb = b;
  }
}

// qp_bf16: lane l's P fragment of a k step from the weights' rows w (r: the tile's row l / 4, k0:
// the step's first key 16 s + 2 (l % 4)): (row r: keys k0, k0 + 1), (row r + 8: the same), (row
// r: k0 + 8, + 9), (row r + 8: the same), each pair rounded to bf16.
__device__ __forceinline__ uint4 PFragmentBf16(const float (*w)[kSPitch], int r, int k0) {
  return make_uint4(Bf16Pair(w[r][k0], w[r][k0 + 1]), Bf16Pair(w[r + 8][k0], w[r + 8][k0 + 1]),
                    Bf16Pair(w[r][k0 + 8], w[r][k0 + 9]),
                    Bf16Pair(w[r + 8][k0 + 8], w[r + 8][k0 + 9]));
}

// A chunk's P V of one n tile (C fragment: rows g, g + 8) folded into the running output.
__device__ __forceinline__ void FoldPv(float (&acc)[4], const float (&pv)[4], float a_g, float b_g,
                                       float a_g8, float b_g8) {
  acc[0] = Fold(acc[0], pv[0], a_g, b_g);
  acc[1] = Fold(acc[1], pv[1], a_g, b_g);
  acc[2] = Fold(acc[2], pv[2], a_g8, b_g8);
  acc[3] = Fold(acc[3], pv[3], a_g8, b_g8);
}

// The FP8 cache's row block (attention_sparse_tc_row_sm90.cu): whether unsplit rows take it
// (SparseAttentionParams::tc_row, KernelOptions::attention_tc_row_min_rows, its shapes), and its
// launch.
bool RowBlockFor(const SparseAttentionParams& p);
void LaunchRowBlock(const SparseAttentionParams& p, StreamHandle stream);

}  // namespace dsinfer::backend::cuda::attn_tc
