// Sparse MQA attention on the tensor cores (LaunchSparseAttentionTc, attention_sparse.cuh; #27).
//
// A block owns one query row's tile of 16 heads (one mma m tile; a last partial tile is padded
// with zero queries whose outputs are not written). The row's keys (window, then compressed
// entries, as the CUDA-core kernel lists them) go in chunks of kChunk = 64:
//   S  = Q[16 x dim] K^T[dim x 64]: warp w the chunk's keys 8w .. 8w + 7 (one n tile), all of dim
//        (two mma chains, even and odd k steps, added at the end)
//   softmax: warp w heads w and w + 8, an online step per chunk (max, correction, exp, sum)
//   O += P[16 x 64] V[64 x dim] (V = K): warp w the output columns [w dim / 8, (w + 1) dim / 8)
// then O / den (the sink in the denominator), the inverse RoPE of the trailing rope dims, the
// output and its optional act_quant, as the CUDA-core kernel.
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
// Batch invariance: each output element's operation sequence — the chunking, the k-step order of
// the mma chains, the softmax steps, the epilogue — depends on (heads, dim, the row's key list) and
// on nothing else: not on the rows of the launch, the grid or which SM runs the block. A row run
// alone (decode) has the bits it has inside an 8,192-row prefill.
//
// Fragment orders. Within a k16 step any bijection between mma k indices and the data's columns
// gives the same sum as long as A and B agree; lane (g = lane / 4, q = lane % 4) holds k indices
// {2q, 2q+1} (a0/a1, b0) and {2q+8, 2q+9} (a2/a3, b1), so both take one float4 of 4 consecutive
// columns: S's k (dim) step s reads columns Off(s, q) .. +3 (pairs of steps cover 32 columns: rows
// of K that two lanes of a 128-bit phase read hit distinct banks), P V's k (key) step reads keys
// 16s + 4q .. +3. The queries' split fragments are built once per block in shared memory.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "backend/cuda/attention_query.cuh"
#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 16;             // heads per block: one mma m tile
constexpr int kChunk = 8 * kWarps;    // keys per step: one 8-key n tile per warp
constexpr int kSPitch = kChunk + 16;  // floats per score row (float4 fragment loads conflict-free)
constexpr int kMaxDim = 512;
constexpr int kMaxNt = kMaxDim / (8 * kWarps);  // output n tiles per warp (dim 512: 8)

// Shared memory beyond the static arrays: the queries' split fragments [dim / 16][3][32] uint4 and
// a [kTile][dim] fp32 staging area (the queries in the prologue, the output in the epilogue).
constexpr size_t DynSmem(int dim) {
  return static_cast<size_t>(dim / 16) * 3 * 32 * 16 + static_cast<size_t>(kTile) * dim * 4;
}

__device__ __forceinline__ uint32_t Bf16Bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ float FromBf16(uint32_t b) { return __uint_as_float(b << 16); }

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

__device__ __forceinline__ void Mma(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1, float (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The six kept part products of one k16 step into d, smallest first (the file comment).
// a[i]: A's part i + 1 fragment (4 registers); b0[j], b1[j]: B's part j + 1.
__device__ __forceinline__ void Mma6(const uint4 (&a)[3], const uint32_t (&b0)[3],
                                     const uint32_t (&b1)[3], float (&d)[4]) {
  Mma(a[2].x, a[2].y, a[2].z, a[2].w, b0[0], b1[0], d);
  Mma(a[1].x, a[1].y, a[1].z, a[1].w, b0[1], b1[1], d);
  Mma(a[0].x, a[0].y, a[0].z, a[0].w, b0[2], b1[2], d);
  Mma(a[1].x, a[1].y, a[1].z, a[1].w, b0[0], b1[0], d);
  Mma(a[0].x, a[0].y, a[0].z, a[0].w, b0[1], b1[1], d);
  Mma(a[0].x, a[0].y, a[0].z, a[0].w, b0[0], b1[0], d);
}

// The first of the 4 columns lane quad q takes in S's k step s (pairs of steps cover 32 columns).
__device__ __forceinline__ int Off(int s, int q) {
  return 32 * (s >> 1) + 8 * (s & 1) + 16 * (q >> 1) + 4 * (q & 1);
}

// The fold of one chunk's partial softmax (its own max mc, its sum of exp(z - mc), its P V) into a
// running one (max M, sum L, output O): M' = max(M, mc), X' = X · exp(M - M') + x · exp(mc - M').
// The in-block chunk loop and the combine kernel both call these, on the same values in the same
// chunk order, so a row's chunks give the same bits in one block or in one block each.
__device__ __forceinline__ void FoldScales(float m_run, float mc, float* m_new, float* a,
                                           float* b) {
  *m_new = fmaxf(m_run, mc);
  *a = expf(m_run - *m_new);  // nothing yet (-inf): 0
  *b = expf(mc - *m_new);
}
__device__ __forceinline__ float Fold(float run, float part, float a, float b) {
  return __fmaf_rn(part, b, __fmul_rn(run, a));
}
// The output's factor for a head: its weight over the softmax denominator with the sink.
__device__ __forceinline__ float OutFactor(float m_run, float l_run, float sink) {
  const float M = fmaxf(m_run, sink);
  const float w = m_run == -INFINITY ? 0.0f : expf(m_run - M);  // no keys: 0
  return w / (l_run * w + expf(sink - M));
}

// Row t's key count (its window, then its compressed entries), as the CUDA-core kernel lists them.
__device__ __forceinline__ int RowKeys(const SparseAttentionParams& p, int64_t t, int pos) {
  const int n_win = min(p.window_size, pos + 1);
  int n_comp = 0;
  if (p.rate > 0) n_comp = p.sel ? p.sel_count[t] : (pos + 1) / p.rate;
  return n_win + n_comp;
}

// Blocks per query row: tiles of 16 heads, the last one padded.
__host__ __device__ constexpr int HeadTiles(int heads) { return (heads + kTile - 1) / kTile; }

// Floats of one chunk's partial in the split workspace: P V [kTile][dim], then max and sum [kTile].
__host__ __device__ constexpr int64_t PartFloats(int dim) {
  return static_cast<int64_t>(kTile) * dim + 2 * kTile;
}

// The epilogue on the output tile in `stage` ([kTile][dim], already scaled by OutFactor): the
// inverse RoPE of the trailing rope dims, the output rows and their optional act_quant.
__device__ __forceinline__ void FinishTile(const SparseAttentionParams& p, float* stage, int64_t t,
                                           int h0, int pos) {
  const int dim = p.dim, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = p.rope_dim / 2, roff = dim - p.rope_dim;
  for (int i = threadIdx.x; i < kTile * half; i += kThreads) {
    const int row = i / half, j = i % half;
    float* r = stage + row * dim + roff + 2 * j;
    RotatePair(r[0], r[1], pos, p.inv_freq[j], true);
  }
  __syncthreads();
  const int rows = min(kTile, p.heads - h0);
  for (int i = threadIdx.x; i < rows * (dim / 4); i += kThreads) {
    const int row = i / (dim / 4), c = 4 * (i % (dim / 4));
    *reinterpret_cast<float4*>(p.out + (t * p.heads + h0 + row) * dim + c) =
        *reinterpret_cast<const float4*>(stage + row * dim + c);
  }
  if (p.out_q != nullptr) {  // (row, block b) per warp: act_quant block b of head h0 + row
    const int blocks = dim / qcore::kQb;
    for (int task = warp; task < rows * blocks; task += kWarps) {
      const int row = task / blocks, b = task % blocks;
      const int c = b * qcore::kQb + 4 * lane;
      float s;
      const uint2 qv =
          qcore::QuantBlock(*reinterpret_cast<const float4*>(stage + row * dim + c), &s);
      const int64_t col = static_cast<int64_t>(h0 + row) * dim + c;
      *reinterpret_cast<uint2*>(p.out_q + t * p.out_ldq + col) = qv;
      if (lane == 0) p.out_s[t * p.out_lds + col / qcore::kQb] = s;
    }
  }
}

// kSplit false: block (row, tile) folds all of the row's chunks and writes the output.
// kSplit true: block (row, tile; chunk blockIdx.y) writes its chunk's partial to ws
// ([row][tile][max_chunks] partials); the combine kernel folds them.
template <bool kSplit>
__global__ void __launch_bounds__(kThreads, 2)
    SparseAttentionTcKernel(SparseAttentionParams p, float* ws, int max_chunks) {
  PdlTrigger();
  PdlWait();
  __shared__ __align__(16) float sc[kTile][kSPitch];      // a chunk's scores, then its weights P
  __shared__ __align__(16) uint4 pf[kChunk / 16][3][32];  // P's split fragments per k step
  __shared__ float fa[kTile], fb[kTile];  // per head: the chunk's fold factors; then 1 / den
  __shared__ const float* kp[2][kChunk];  // the chunk's key rows (null past the end)
  extern __shared__ __align__(16) unsigned char dyn_raw[];
  const int dim = p.dim;
  uint4* const qf = reinterpret_cast<uint4*>(dyn_raw);  // [dim / 16][3][32]
  float* const stage =
      reinterpret_cast<float*>(dyn_raw + static_cast<size_t>(dim / 16) * 3 * 32 * 16);

  const int tiles = HeadTiles(p.heads);
  const int64_t t = blockIdx.x / tiles;
  const int h0 = static_cast<int>(blockIdx.x % tiles) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  const int pos = p.meta.pos[t], slot = p.meta.slot[t];
  const int seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  const int n_win = min(p.window_size, pos + 1);
  const int n_keys = RowKeys(p, t, pos);
  const int n_chunks = (n_keys + kChunk - 1) / kChunk;
  int c_begin = 0, c_end = n_chunks;
  if constexpr (kSplit) {
    c_begin = static_cast<int>(blockIdx.y);
    c_end = c_begin + 1;
    if (c_begin >= n_chunks) return;  // (uniform over the block; after the wait)
  }

  // Prologue: warp w loads heads h0 + w and h0 + w + 8 (zeros past the last head), with the
  // per-head RMSNorm and RoPE as the CUDA-core kernel computes them (the same operations), into
  // the staging area; then the queries' split fragments.
  float q_freq[kQueryPerLane / 2];
  QueryRopeFreqs(p, q_freq);
#pragma unroll 1
  for (int r2 = 0; r2 < 2; ++r2) {
    const int row = warp + 8 * r2, h = h0 + row;
    float q[kQueryPerLane];
    LoadQuery(p, p.q + (t * p.heads + h) * dim, h < p.heads, pos, q_freq, q);
#pragma unroll
    for (int v = 0; v < kQueryPerLane / 4; ++v) {
      const int c = 4 * lane + 128 * v;
      if (c < dim)
        *reinterpret_cast<float4*>(stage + row * dim + c) =
            make_float4(q[4 * v], q[4 * v + 1], q[4 * v + 2], q[4 * v + 3]);
    }
  }
  __syncthreads();
  // Fragment (s, lane): rows g and g + 8 (heads), columns Off(s, q) .. +3; a0 a1 a2 a3 =
  // (row g: cols 0, 1), (row g + 8: 0, 1), (row g: 2, 3), (row g + 8: 2, 3).
  for (int e = threadIdx.x; e < (dim / 16) * 32; e += kThreads) {
    const int s = e / 32, l = e % 32, off = Off(s, l % 4);
    const float4 r0 = *reinterpret_cast<const float4*>(stage + (l / 4) * dim + off);
    const float4 r1 = *reinterpret_cast<const float4*>(stage + (l / 4 + 8) * dim + off);
    uint32_t a0[3], a1[3], a2[3], a3[3];
    SplitPair(r0.x, r0.y, a0);
    SplitPair(r1.x, r1.y, a1);
    SplitPair(r0.z, r0.w, a2);
    SplitPair(r1.z, r1.w, a3);
#pragma unroll
    for (int part = 0; part < 3; ++part)
      qf[(s * 3 + part) * 32 + l] = make_uint4(a0[part], a1[part], a2[part], a3[part]);
  }
  // (The loop's first __syncthreads orders these writes before the reads.)

  const float* window = n_win > 0 ? p.window.Base(slot) : nullptr;  // the sequence's ring
  auto key_ptr = [&](int j) -> const float* {
    if (j < n_win) {
      const int s = pos - n_win + 1 + j;
      return s >= seg_start ? p.kv + (static_cast<int64_t>(seg_begin) + s - seg_start) * dim
                            : window + (s % p.window.cap) * p.window.width;
    }
    const int e = p.sel ? p.sel[t * p.sel_stride + (j - n_win)] : j - n_win;
    return p.comp.Entry(slot, e);
  };

  const int nt = dim / (8 * kWarps);  // output n tiles per warp
  const int dbase = warp * (dim / kWarps);
  float acc[kMaxNt][4];  // the running output (kSplit: the chunk's P V)
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
    const float** const kpb = kp[it & 1];  // double-buffered: the previous chunk's P V may run
    if (threadIdx.x < kChunk)
      kpb[threadIdx.x] = c0 + static_cast<int>(threadIdx.x) < n_keys
                             ? key_ptr(c0 + static_cast<int>(threadIdx.x))
                             : nullptr;
    __syncthreads();
    // S: warp w's n tile, keys 8w .. 8w + 7 of the chunk; lane (g, q) holds key 8w + g's columns.
    {
      const float* krow = kpb[warp * 8 + g];
      // Two accumulator chains, even and odd k steps (two mma chains in flight per warp), summed
      // once at the end: a fixed order like the rest. Unrolled 4 (8 key loads in flight per lane;
      // unrolled 2: CSA decode at 32 rows 195 -> 169 us, 8K prefill 22.5 -> 21.8 ms,
      // bench_attention).
      float s4[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 4
      for (int s2 = 0; s2 < dim / 16; s2 += 2) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int s = s2 + u;
          const float4 k4 = krow != nullptr
                                ? __ldg(reinterpret_cast<const float4*>(krow + Off(s, qd)))
                                : make_float4(0, 0, 0, 0);
          uint32_t b0[3], b1[3];
          SplitPair(k4.x, k4.y, b0);
          SplitPair(k4.z, k4.w, b1);
          const uint4 a[3] = {qf[(s * 3) * 32 + lane], qf[(s * 3 + 1) * 32 + lane],
                              qf[(s * 3 + 2) * 32 + lane]};
          Mma6(a, b0, b1, s4[u]);
        }
      }
      // c0, c1: head row g, keys 8w + 2q, +1; c2, c3: row g + 8.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = warp * 8 + 2 * qd + (i & 1), row = g + 8 * (i >> 1);
        sc[row][key] = c0 + key < n_keys ? (s4[0][i] + s4[1][i]) * p.scale : -INFINITY;
      }
    }
    __syncthreads();
    // The chunk's softmax: warp w heads w and w + 8, lane the chunk's keys lane and lane + 32;
    // its own max (finite: the chunk's first key exists; keys past the end weigh exp(-inf) = 0)
    // and sum; then the fold factors of the running sums (kSplit: the partial's max and sum).
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      const int row = warp + 8 * r2;
      const float z0 = sc[row][lane], z1 = sc[row][lane + 32];
      float mc = fmaxf(z0, z1);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, off));
      const float e0 = expf(z0 - mc), e1 = expf(z1 - mc);
      float sum = e0 + e1;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();
      sc[row][lane] = e0;
      sc[row][lane + 32] = e1;
      if constexpr (kSplit) {
        if (lane == 0) {
          part[kTile * dim + row] = mc;
          part[kTile * dim + kTile + row] = sum;
        }
      } else {
        float m_new, a, b;
        FoldScales(m_run[r2], mc, &m_new, &a, &b);
        l_run[r2] = Fold(l_run[r2], sum, a, b);
        m_run[r2] = m_new;
        if (lane == 0) {
          fa[row] = a;
          fb[row] = b;
        }
      }
    }
    __syncthreads();
    // P's split fragments, once per chunk: (k step s, lane l) rows l / 4 and l / 4 + 8, keys
    // 16s + 4 (l % 4) .. +3.
    if (threadIdx.x < (kChunk / 16) * 32) {
      const int s = threadIdx.x / 32, l = threadIdx.x % 32, k0 = 16 * s + 4 * (l % 4);
      const float4 pa = *reinterpret_cast<const float4*>(&sc[l / 4][k0]);
      const float4 pb = *reinterpret_cast<const float4*>(&sc[l / 4 + 8][k0]);
      uint32_t a0[3], a1[3], a2[3], a3[3];
      SplitPair(pa.x, pa.y, a0);
      SplitPair(pb.x, pb.y, a1);
      SplitPair(pa.z, pa.w, a2);
      SplitPair(pb.z, pb.w, a3);
#pragma unroll
      for (int part_i = 0; part_i < 3; ++part_i)
        pf[s][part_i][l] = make_uint4(a0[part_i], a1[part_i], a2[part_i], a3[part_i]);
    }
    __syncthreads();
    // The chunk's P V (warp w's n tiles, each its own chain from zero over the chunk's 4 k steps;
    // k step s takes keys 16s + 4q .. +3), folded into the running output (kSplit: kept).
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
            const int k0 = 16 * s + 4 * qd;
            const float* v0 = kpb[k0];
            const float* v1 = kpb[k0 + 1];
            const float* v2 = kpb[k0 + 2];
            const float* v3 = kpb[k0 + 3];
            const float x0 = v0 != nullptr ? __ldg(v0 + d) : 0.0f;
            const float x1 = v1 != nullptr ? __ldg(v1 + d) : 0.0f;
            const float x2 = v2 != nullptr ? __ldg(v2 + d) : 0.0f;
            const float x3 = v3 != nullptr ? __ldg(v3 + d) : 0.0f;
            uint32_t b0[3], b1[3];
            SplitPair(x0, x1, b0);
            SplitPair(x2, x3, b1);
            const uint4 a[3] = {pf[s][0][lane], pf[s][1][lane], pf[s][2][lane]};
            Mma6(a, b0, b1, pv);
          }
          if constexpr (kSplit) {
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][c] = pv[c];
          } else {
            acc[i][0] = Fold(acc[i][0], pv[0], a_g, b_g);
            acc[i][1] = Fold(acc[i][1], pv[1], a_g, b_g);
            acc[i][2] = Fold(acc[i][2], pv[2], a_g8, b_g8);
            acc[i][3] = Fold(acc[i][3], pv[3], a_g8, b_g8);
          }
        }
      }
    }
  }

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
    // into the staging area, then FinishTile.
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
    FinishTile(p, stage, t, h0, pos);
  }
}

// Block (row, tile): the row's chunk partials folded in chunk order (the in-block loop's
// operations on the same values), the output factor, then FinishTile.
__global__ void __launch_bounds__(kThreads)
    SparseAttentionTcCombineKernel(SparseAttentionParams p, const float* ws, int max_chunks) {
  PdlTrigger();
  PdlWait();
  __shared__ float fac[kTile];
  extern __shared__ __align__(16) float stage_c[];  // [kTile][dim]
  const int dim = p.dim;
  const int tiles = HeadTiles(p.heads);
  const int64_t t = blockIdx.x / tiles;
  const int h0 = static_cast<int>(blockIdx.x % tiles) * kTile;
  const int pos = p.meta.pos[t];
  const int n_chunks = (RowKeys(p, t, pos) + kChunk - 1) / kChunk;
  const int64_t pf_n = PartFloats(dim);
  const float* base = ws + static_cast<int64_t>(blockIdx.x) * max_chunks * pf_n;
  if (threadIdx.x < kTile) {
    const int row = threadIdx.x;
    float m_run = -INFINITY, l_run = 0.0f;
    for (int c = 0; c < n_chunks; ++c) {
      float m_new, a, b;
      FoldScales(m_run, base[c * pf_n + kTile * dim + row], &m_new, &a, &b);
      l_run = Fold(l_run, base[c * pf_n + kTile * dim + kTile + row], a, b);
      m_run = m_new;
    }
    const float sink = h0 + row < p.heads ? p.sink[h0 + row] : 0.0f;
    fac[row] = OutFactor(m_run, l_run, sink);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * dim; e += kThreads) {
    const int row = e / dim;
    float m_run = -INFINITY, o = 0.0f;
    for (int c = 0; c < n_chunks; ++c) {
      float m_new, a, b;
      FoldScales(m_run, base[c * pf_n + kTile * dim + row], &m_new, &a, &b);
      o = Fold(o, base[c * pf_n + e], a, b);
      m_run = m_new;
    }
    stage_c[e] = __fmul_rn(o, fac[row]);
  }
  __syncthreads();
  FinishTile(p, stage_c, t, h0, pos);
}

}  // namespace

bool SparseAttentionTcSupports(const SparseAttentionParams& p) {
  return p.heads > 0 && p.dim > 0 && p.dim <= kMaxDim && p.dim % (8 * kWarps) == 0 &&
         p.Validate().ok();
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

// Split when asked, or when the rows' tiles are at most an eighth of the SMs and a row can reach
// 4 chunks or more (bench_attention, H200: CSA's 10 chunks at 1 row 151 -> 77 us split; at 32 rows
// the split is slower, 195 -> 248 us, as are SWA's 2 chunks at 1 row, 41 -> 48 us: the partials'
// round trip and the combine cost more than the parallelism gains); only where the workspace
// holds every chunk the rows can reach (the HCA entries up to the list's capacity) and the grid
// does. Never a result.
bool SparseAttentionTcWillSplit(const SparseAttentionParams& p) {
  const int64_t blocks = p.meta.n * HeadTiles(p.heads);
  const int64_t max_chunks = SparseAttentionTcMaxChunks(p);
  const bool want =
      p.tc_split > 0 || (p.tc_split == 0 && 8 * blocks <= int64_t{SmCount()} && max_chunks >= 4);
  const bool bounded = p.rate == 0 || p.sel != nullptr || p.comp.capacity > 0;
  return want && bounded && max_chunks > 1 && max_chunks <= 65535 && p.tc_workspace != nullptr &&
         SparseAttentionTcSplitFloats(p) <= p.tc_workspace_floats;
}

void LaunchSparseAttentionTc(const SparseAttentionParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  DSINFER_CHECK(SparseAttentionTcSupports(p));  // callers dispatch on it (LaunchSparseAttention)
  static const bool attr_set = [] {
    for (auto* k : {SparseAttentionTcKernel<false>, SparseAttentionTcKernel<true>}) {
      CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(DynSmem(kMaxDim))));
    }
    return true;
  }();
  (void)attr_set;
  const int64_t tiles = HeadTiles(p.heads), blocks = p.meta.n * tiles;
  const int64_t max_chunks = SparseAttentionTcMaxChunks(p);
  if (SparseAttentionTcWillSplit(p)) {
    LaunchKernel(SparseAttentionTcKernel<true>,
                 dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(max_chunks)),
                 dim3(kThreads), DynSmem(p.dim), stream, p, p.tc_workspace,
                 static_cast<int>(max_chunks));
    CUDA_CHECK_LAUNCH();
    LaunchKernel(SparseAttentionTcCombineKernel, dim3(static_cast<unsigned>(blocks)),
                 dim3(kThreads), static_cast<size_t>(kTile) * p.dim * sizeof(float), stream, p,
                 static_cast<const float*>(p.tc_workspace), static_cast<int>(max_chunks));
    CUDA_CHECK_LAUNCH();
    return;
  }
  LaunchKernel(SparseAttentionTcKernel<false>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
               DynSmem(p.dim), stream, p, static_cast<float*>(nullptr), 0);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
