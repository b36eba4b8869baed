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
constexpr int kMaxPerLane = 16;                 // query values per lane in the prologue (dim 512)

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

__global__ void __launch_bounds__(kThreads, 2) SparseAttentionTcKernel(SparseAttentionParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ __align__(16) float sc[kTile][kSPitch];  // a chunk's scores, then its weights P
  __shared__ float corr[kTile], fac[kTile];           // per head: the chunk's correction; 1 / den
  __shared__ const float* kp[2][kChunk];              // the chunk's key rows (null past the end)
  extern __shared__ __align__(16) unsigned char dyn_raw[];
  const int dim = p.dim;
  uint4* const qf = reinterpret_cast<uint4*>(dyn_raw);  // [dim / 16][3][32]
  float* const stage =
      reinterpret_cast<float*>(dyn_raw + static_cast<size_t>(dim / 16) * 3 * 32 * 16);

  const int tiles = (p.heads + kTile - 1) / kTile;
  const int64_t t = blockIdx.x / tiles;
  const int h0 = static_cast<int>(blockIdx.x % tiles) * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  const int pos = p.meta.pos[t], slot = p.meta.slot[t];
  const int seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  const int n_win = min(p.window_size, pos + 1);
  int n_comp = 0;
  if (p.rate > 0) n_comp = p.sel ? p.sel_count[t] : (pos + 1) / p.rate;
  const int n_keys = n_win + n_comp;

  // Prologue: warp w loads heads h0 + w and h0 + w + 8 (zeros past the last head), with the
  // per-head RMSNorm and RoPE as the CUDA-core kernel computes them (the same operations), into
  // the staging area; then the queries' split fragments.
#pragma unroll 1
  for (int r2 = 0; r2 < 2; ++r2) {
    const int row = warp + 8 * r2, h = h0 + row;
    float q[kMaxPerLane];
    const float* qrow = p.q + (t * p.heads + h) * dim;
#pragma unroll
    for (int v = 0; v < kMaxPerLane / 4; ++v) {
      const int c = 4 * lane + 128 * v;
      const float4 a = h < p.heads && c < dim ? *reinterpret_cast<const float4*>(qrow + c)
                                              : make_float4(0, 0, 0, 0);
      q[4 * v] = a.x;
      q[4 * v + 1] = a.y;
      q[4 * v + 2] = a.z;
      q[4 * v + 3] = a.w;
    }
    if (p.q_norm_eps >= 0.0f && h < p.heads) {  // (a padded head stays 0, also at eps 0)
      float ss = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) ss = fmaf(q[i], q[i], ss);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
      const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + p.q_norm_eps);
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) q[i] *= scale;
    }
    if (p.q_norm_eps >= 0.0f || p.q_rope) {
      const int roff = dim - p.rope_dim;
#pragma unroll
      for (int v = 0; v < kMaxPerLane / 4; ++v) {
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          const int c = 4 * lane + 128 * v + i;
          if (c >= roff && c < dim) {
            float cs, sn;
            RopeCosSin(pos, p.inv_freq[(c - roff) / 2], &cs, &sn);
            RotateWith(q[4 * v + i], q[4 * v + i + 1], cs, sn, false);
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < kMaxPerLane / 4; ++v) {
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
  float acc[kMaxNt][4];
#pragma unroll
  for (int i = 0; i < kMaxNt; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[i][c] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads warp, warp + 8

#pragma unroll 1
  for (int c0 = 0, it = 0; c0 < n_keys; c0 += kChunk, ++it) {
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
      // once at the end: a fixed order like the rest.
      float s4[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 2
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
    // Online softmax: warp w heads w and w + 8, lane the chunk's keys lane and lane + 32. The
    // chunk's first key exists, so m_new is finite; keys past the end weigh exp(-inf) = 0.
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      const int row = warp + 8 * r2;
      const float z0 = sc[row][lane], z1 = sc[row][lane + 32];
      float mc = fmaxf(z0, z1);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, off));
      const float m_new = fmaxf(m_run[r2], mc);
      const float cr = expf(m_run[r2] - m_new);  // m = -inf first: 0
      const float e0 = expf(z0 - m_new), e1 = expf(z1 - m_new);
      float sum = e0 + e1;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run[r2] = l_run[r2] * cr + sum;
      m_run[r2] = m_new;
      __syncwarp();
      sc[row][lane] = e0;
      sc[row][lane + 32] = e1;
      if (lane == 0) corr[row] = cr;
    }
    __syncthreads();
    // O = O corr + P V: warp w's n tiles; k step s takes keys 16s + 4q .. +3 of the chunk.
    {
      const float cg = corr[g], cg8 = corr[g + 8];
#pragma unroll
      for (int i = 0; i < kMaxNt; ++i) {
        acc[i][0] *= cg;
        acc[i][1] *= cg;
        acc[i][2] *= cg8;
        acc[i][3] *= cg8;
      }
#pragma unroll
      for (int s = 0; s < kChunk / 16; ++s) {
        const int k0 = 16 * s + 4 * qd;
        const float4 pa = *reinterpret_cast<const float4*>(&sc[g][k0]);
        const float4 pb = *reinterpret_cast<const float4*>(&sc[g + 8][k0]);
        uint32_t a0[3], a1[3], a2[3], a3[3];
        SplitPair(pa.x, pa.y, a0);
        SplitPair(pb.x, pb.y, a1);
        SplitPair(pa.z, pa.w, a2);
        SplitPair(pb.z, pb.w, a3);
        const uint4 a[3] = {make_uint4(a0[0], a1[0], a2[0], a3[0]),
                            make_uint4(a0[1], a1[1], a2[1], a3[1]),
                            make_uint4(a0[2], a1[2], a2[2], a3[2])};
        const float* v0 = kpb[k0];
        const float* v1 = kpb[k0 + 1];
        const float* v2 = kpb[k0 + 2];
        const float* v3 = kpb[k0 + 3];
#pragma unroll
        for (int i = 0; i < kMaxNt; ++i) {
          if (i < nt) {
            const int d = dbase + 8 * i + g;  // the lane's B column
            const float x0 = v0 != nullptr ? __ldg(v0 + d) : 0.0f;
            const float x1 = v1 != nullptr ? __ldg(v1 + d) : 0.0f;
            const float x2 = v2 != nullptr ? __ldg(v2 + d) : 0.0f;
            const float x3 = v3 != nullptr ? __ldg(v3 + d) : 0.0f;
            uint32_t b0[3], b1[3];
            SplitPair(x0, x1, b0);
            SplitPair(x2, x3, b1);
            Mma6(a, b0, b1, acc[i]);
          }
        }
      }
    }
  }

  // Epilogue: 1 / den per head (the sink in the denominator), the output rows into the staging
  // area, the inverse RoPE, then the output and its act_quant.
  if (lane == 0) {
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      const int row = warp + 8 * r2;
      const float sink = h0 + row < p.heads ? p.sink[h0 + row] : 0.0f;
      const float M = fmaxf(m_run[r2], sink);
      const float w = m_run[r2] == -INFINITY ? 0.0f : expf(m_run[r2] - M);  // no keys: 0
      const float den = l_run[r2] * w + expf(sink - M);
      fac[row] = w / den;
    }
  }
  __syncthreads();
  {
    const float fg = fac[g], fg8 = fac[g + 8];
#pragma unroll
    for (int i = 0; i < kMaxNt; ++i) {
      if (i < nt) {
        const int c = dbase + 8 * i + 2 * qd;
        *reinterpret_cast<float2*>(stage + g * dim + c) =
            make_float2(acc[i][0] * fg, acc[i][1] * fg);
        *reinterpret_cast<float2*>(stage + (g + 8) * dim + c) =
            make_float2(acc[i][2] * fg8, acc[i][3] * fg8);
      }
    }
  }
  __syncthreads();
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

}  // namespace

bool SparseAttentionTcSupports(const SparseAttentionParams& p) {
  return p.heads > 0 && p.dim > 0 && p.dim <= kMaxDim && p.dim % (8 * kWarps) == 0 &&
         p.Validate().ok();
}

void LaunchSparseAttentionTc(const SparseAttentionParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  DSINFER_CHECK(SparseAttentionTcSupports(p));  // callers dispatch on it (LaunchSparseAttention)
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(SparseAttentionTcKernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(DynSmem(kMaxDim))));
    return true;
  }();
  (void)attr_set;
  const int64_t tiles = (p.heads + kTile - 1) / kTile;
  LaunchKernel(SparseAttentionTcKernel, dim3(static_cast<unsigned>(p.meta.n * tiles)),
               dim3(kThreads), DynSmem(p.dim), stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
