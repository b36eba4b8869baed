#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/indexer_topk.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/packed_row.cuh"
#include "backend/indexer_head_sum.h"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kMaxHeads = indexer::kMaxHeads;  // (the score tree's heads)

constexpr int kMaxRopeHalf = 64;

// Scoring tiles: kE entries per block, kHpt heads per thread (threads kE * kMaxHeads / kHpt). Wide
// tiles share the staged query over more entries (prefill); narrow ones spread a few tokens'
// entries over more blocks (decode). The arithmetic per score is the same for both.
template <int kE, int kHpt>
struct ScoreTile {
  static constexpr int kThreads = kE * (kMaxHeads / kHpt);
};
using WideTile = ScoreTile<32, 8>;
using NarrowTile = ScoreTile<8, 1>;

size_t ScoreSmemBytes(int heads, int head_dim, int entries) {
  return (static_cast<size_t>(heads) * head_dim + kMaxHeads +
          static_cast<size_t>(entries) * (head_dim + 4) + entries * (kMaxHeads + 1)) *
         sizeof(float);
}

// Whether row t's candidate blocks need its scores (more visible blocks than are kept).
__device__ __forceinline__ bool ScoresCandidateBlocks(const IndexerTopKParams& p, int visible) {
  if (p.candidates_out == nullptr || p.candidate_block_size <= 0) return false;
  return (visible + p.candidate_block_size - 1) / p.candidate_block_size > p.candidate_topk_blocks;
}

// head_dim^-0.5 rounded once (the CPU's 1 / sqrt(head_dim)).
__device__ __forceinline__ float SoftmaxScale(int head_dim) {
  return __fdiv_rn(1.0f, __fsqrt_rn(static_cast<float>(head_dim)));
}
// A head's term of a score (the CPU's (max(dot, 0) * scale) * weight); a score is the terms summed
// in indexer::HeadSum's tree.
__device__ __forceinline__ float HeadScore(float dot, float softmax_scale, float weight) {
  return __fmul_rn(__fmul_rn(fmaxf(dot, 0.0f), softmax_scale), weight);
}

// Block (tile, t): scores of entries [tile*kE, tile*kE+kE) of token t. Thread (group g, e): entry
// e = tid % kE against heads [g*kHpt, g*kHpt+kHpt), g = tid / kE.
template <int kE, int kHpt>
__global__ void __launch_bounds__(ScoreTile<kE, kHpt>::kThreads)
    IndexerScoreKernel(IndexerTopKParams p, int64_t cap) {
  PdlTrigger();
  PdlWait();
  extern __shared__ float smem[];
  __shared__ float cs[kMaxRopeHalf][2];
  const int64_t t = blockIdx.y;
  const int pos = p.meta.pos[t];
  const int visible = (pos + 1) / p.rate;
  const int k = min(p.topk, visible);
  const int w0 = blockIdx.x * kE;
  if ((k == visible && !ScoresCandidateBlocks(p, visible)) || w0 >= visible) return;
  const int H = p.heads, Dh = p.head_dim, ks = Dh + 4;
  float* q = smem;                          // [H, Dh]
  float* wts = q + H * Dh;                  // [kMaxHeads]
  float* keys = wts + kMaxHeads;            // [kE, Dh + 4]
  float* pv = keys + kE * ks;               // [kE, kMaxHeads + 1]
  {
    // H·Dh is a multiple of 4 (head_dim % 4 == 0): 16-byte loads, several in flight per thread.
    const float4* qs = reinterpret_cast<const float4*>(p.q + t * H * Dh);
    float4* qd = reinterpret_cast<float4*>(q);
#pragma unroll 8
    for (int i = threadIdx.x; i < H * Dh / 4; i += blockDim.x) qd[i] = qs[i];
  }
  for (int i = threadIdx.x; i < H; i += blockDim.x) wts[i] = p.weights[t * H + i] * p.weight_scale;
  const int half = p.rope_dim / 2;
  RopeTable(pos, p.inv_freq, half, cs);
  const int ne = min(kE, visible - w0);
  __shared__ const float* entry_ptr[kE];  // the tile's keys (each through the page table once)
  if (threadIdx.x < ne) entry_ptr[threadIdx.x] = p.keys.Entry(p.meta.slot[t], w0 + threadIdx.x);
  __syncthreads();
  for (int i = threadIdx.x; i < ne * (Dh / 4); i += blockDim.x) {
    const int e = i / (Dh / 4), c = (i % (Dh / 4)) * 4;
    *reinterpret_cast<float4*>(keys + e * ks + c) =
        p.key_format.packed() ? PackedLoad4(p.key_format, entry_ptr[e], c)
                              : *reinterpret_cast<const float4*>(entry_ptr[e] + c);
  }
  __syncthreads();
  if (half > 0) {  // RoPE of each head's trailing pairs, on the staged query
    for (int i = threadIdx.x; i < H * half; i += blockDim.x) {
      const int h = i / half, j = i % half;
      float* v = q + h * Dh + (Dh - p.rope_dim) + 2 * j;
      RotateWith(v[0], v[1], cs[j][0], cs[j][1], false);
    }
    __syncthreads();
  }
  if (p.query_fp4_block > 0 && Dh % p.query_fp4_block == 0) {  // V4.1: FP4-simulated query
    const int qb = p.query_fp4_block, nb = Dh / qb;
    for (int i = threadIdx.x; i < H * nb; i += blockDim.x)
      FqBlockSerial(q + (i / nb) * Dh + (i % nb) * qb, qb, FakeQuant::kFp4Pow2);
    __syncthreads();
  }
  const int e = threadIdx.x % kE, g = threadIdx.x / kE;
  const float softmax_scale = SoftmaxScale(Dh);
  if (e < ne && g * kHpt < H) {
    float acc[kHpt];
#pragma unroll
    for (int h = 0; h < kHpt; ++h) acc[h] = 0.0f;
    const float* key = keys + e * ks;
    // fp4_blocks: a chain per 32-column block, the blocks' sums added in order; else one chain
    // (0 + chain: the same bits, the chain from +0 is never -0).
    const int block = p.fp4_blocks ? 32 : Dh;
    for (int c0 = 0; c0 < Dh; c0 += block) {
      float blk[kHpt];
#pragma unroll
      for (int h = 0; h < kHpt; ++h) blk[h] = 0.0f;
      for (int c = c0; c < min(Dh, c0 + block); c += 4) {
        const float4 kv = *reinterpret_cast<const float4*>(key + c);
#pragma unroll
        for (int hh = 0; hh < kHpt; ++hh) {
          const int h = g * kHpt + hh;
          if (h < H) {
            const float4 qh = *reinterpret_cast<const float4*>(q + h * Dh + c);
            blk[hh] = fmaf(qh.x, kv.x, blk[hh]);
            blk[hh] = fmaf(qh.y, kv.y, blk[hh]);
            blk[hh] = fmaf(qh.z, kv.z, blk[hh]);
            blk[hh] = fmaf(qh.w, kv.w, blk[hh]);
          }
        }
      }
#pragma unroll
      for (int hh = 0; hh < kHpt; ++hh) acc[hh] += blk[hh];
    }
#pragma unroll
    for (int hh = 0; hh < kHpt; ++hh) {
      const int h = g * kHpt + hh;
      if (h < H) pv[e * (kMaxHeads + 1) + h] = HeadScore(acc[hh], softmax_scale, wts[h]);
    }
  }
  __syncthreads();
  if (threadIdx.x < ne)
    p.scores[t * cap + w0 + threadIdx.x] = indexer::HeadSum(pv + threadIdx.x * (kMaxHeads + 1), H);
}

// ---- the scores on the tensor cores (tensor_core_min_rows) ----
// Block (tile, t): entries [tile * kTcPass * kPasses, ...) of token t, kTcPass per pass. Warp w:
// heads 16 (w % 4) .. + 16 (its A fragments, the token's queries as bf16 pairs, loaded once) x
// entries 32 (w / 4) .. + 32 of the pass (4 n8 tiles). A pass decodes its keys into bf16 rows
// (PackedLoad4's values, exact in bf16), runs per n8 tile and 32-column block two k16 steps from
// zero (the block's exact sum) and adds the blocks in order, then scores as the CUDA cores do.
constexpr int kTcThreads = 256;  // (also the size of TcDecodeKeys' table: one entry a thread)
constexpr int kTcPass = 64;
constexpr int kTcMaxKSteps = 8;                    // head_dim <= 128
constexpr int kTcKeyWords = kTcMaxKSteps * 8 + 4;  // a staged key row's bf16 pairs, padded: the
                                                   // B loads of a warp hit 32 distinct banks
constexpr int kTcQuarters = kMaxHeads / 16;        // a pass's quarter sums: [kTcQuarters][kTcPass]

// The bf16 pair (q[h][c], q[h][c + 1]) of a token's queries; 0 past the heads.
__device__ __forceinline__ uint32_t QueryPair(const float* qt, int h, int H, int Dh, int c) {
  if (h >= H) return 0u;
  const float2 v = *reinterpret_cast<const float2*>(qt + h * Dh + c);
  const __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// What a warp of the tensor-core scoring holds: heads h0 = 16 (w % 4) + g and h1 = h0 + 8 (the
// lane's rows of the m16 tiles), entries n_half = 32 (w / 4) .. + 32 of a pass (4 n8 tiles).
struct TcWarp {
  int H, Dh, nks, g, tq, h0, h1, n_half;
  __device__ __forceinline__ TcWarp(const IndexerTopKParams& p) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    H = p.heads;
    Dh = p.head_dim;
    nks = Dh / 16;
    g = lane / 4;
    tq = lane % 4;
    h0 = (warp % 4) * 16 + g;
    h1 = h0 + 8;
    n_half = (warp / 4) * 32;
  }
  // A: the token's queries (qt: [H][Dh]) as bf16 pairs, per k16 step.
  __device__ __forceinline__ void Queries(const float* qt, uint32_t (&a)[kTcMaxKSteps][4]) const {
#pragma unroll
    for (int ks = 0; ks < kTcMaxKSteps; ++ks) {
      const int c = ks * 16 + 2 * tq;
      const bool in = ks < nks;
      a[ks][0] = in ? QueryPair(qt, h0, H, Dh, c) : 0u;
      a[ks][1] = in ? QueryPair(qt, h1, H, Dh, c) : 0u;
      a[ks][2] = in ? QueryPair(qt, h0, H, Dh, c + 8) : 0u;
      a[ks][3] = in ? QueryPair(qt, h1, H, Dh, c + 8) : 0u;
    }
  }
  // A head's weight (times weight_scale) for token t; 0 past the heads.
  __device__ __forceinline__ float Weight(const IndexerTopKParams& p, int64_t t, int h) const {
    return h < H ? p.weights[t * H + h] * p.weight_scale : 0.0f;
  }
  // A pass's quarter sums into qs ([kTcQuarters][kTcPass]): per n8 tile and 32-column block two k16
  // steps from zero (the block's exact sum), the blocks added in order, HeadScore, then the
  // warp's quarter (heads 16 (w % 4) .. + 16) summed as indexer::QuarterSum: the lane's two heads
  // (u_g), then a butterfly over the lane rows g (lane bits 2, 3, 4), each step halving the
  // values a lane keeps (it keeps the lower or the upper half by its bit and adds the partner's
  // copy of them: the same sum either way round), so that each lane ends with one entry's sum.
  // keys: the pass's kTcPass decoded rows; w0, w1: heads h0's, h1's weights. All four n8 tiles'
  // sums come first, so that their 16 mma chains interleave (the k steps are tested at run time:
  // known at compile time they cost the long prompts, see IndexerScoreTcRunKernel).
  __device__ __forceinline__ void QuarterSums(const uint32_t* keys,
                                              const uint32_t (&a)[kTcMaxKSteps][4],
                                              float softmax_scale, float w0, float w1,
                                              float* qs) const {
    float acc[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const uint32_t* kr = keys + (n_half + nt * 8 + g) * kTcKeyWords + tq;  // B: entry, k pair tq
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[nt][j] = 0.0f;
#pragma unroll
      for (int b = 0; b < kTcMaxKSteps / 2; ++b) {
        if (2 * b < nks) {
          float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          MmaBf16(a[2 * b], kr[16 * b], kr[16 * b + 4], d);
          MmaBf16(a[2 * b + 1], kr[16 * b + 8], kr[16 * b + 12], d);
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[nt][j] += d[j];
        }
      }
    }
    // C fragment (n8 tile nt, n0 = n_half + 8 nt): (head h0, entries n0 + 2 tq, + 1), (head h1,
    // the same entries).
    // x[2 nt + j]: u_g of entry n_half + 8 nt + 2 tq + j.
    float x[8];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        x[2 * nt + j] =
            HeadScore(acc[nt][j], softmax_scale, w0) + HeadScore(acc[nt][2 + j], softmax_scale, w1);
      }
    }
    int vi = 0;  // the kept values' first index
#pragma unroll
    for (int step = 0, n = 8; step < 3; ++step, n /= 2) {
      const bool upper = (g >> step) & 1;  // the partner: lane row g ^ (1 << step)
#pragma unroll
      for (int i = 0; i < n / 2; ++i) {
        const float send = upper ? x[i] : x[i + n / 2];
        const float keep = upper ? x[i + n / 2] : x[i];
        x[i] = keep + __shfl_xor_sync(0xffffffffu, send, 4 << step);
      }
      vi += upper ? n / 2 : 0;
    }
    const int e = n_half + 8 * (vi / 2) + 2 * tq + vi % 2;
    qs[(h0 / 16) * kTcPass + e] = x[0];
  }
  // A score from the quarter sums of entry e (indexer::FoldQuarters).
  __device__ __forceinline__ static float Score(const float* qs, int e) {
    return indexer::FoldQuarters(qs[e], qs[kTcPass + e], qs[2 * kTcPass + e], qs[3 * kTcPass + e]);
  }
};

// The bf16 pair of PackedLoad4's four values (exact in bf16: the FP8 cache's index keys).
__device__ __forceinline__ uint2 Bf16Quad(float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  return make_uint2(*reinterpret_cast<const uint32_t*>(&lo),
                    *reinterpret_cast<const uint32_t*>(&hi));
}

// The index keys' rows of V4 and V4.1 at head_dim 128 (IndexKeyFormat: kFp4Pow2, 128 codes, blocks
// of 32, no tail) decode by a table instead of PackedLoad4's per-value codec steps (which, with the
// runtime divisions of the general loop, were 39% of the many-row scoring's instructions, ncu,
// session 45): a code byte's two values as a bf16 pair at scale 1 (qc::E2m1PairBf16; code 8 is
// +0, as qc::E2m1Value), times the pair (s, s), s = 2^(b - 127) of the block's scale byte b. Both
// factors are bf16 values, and for b in [2, 252] every product (|value| 0 or in [2^-1, 6] times s)
// is 0 or a normal bf16 value: exact, so PackedLoad4's value (one fp32 rounding of the same exact
// product, then exact in bf16) to the bit (tests/unit/kv_cache_test.cc checks the table and the
// range on the host). Other scale bytes take PackedLoad4.
constexpr int kFp4FastDim = 128;
static_assert(kTcThreads == 256, "the table's 256 entries: one a thread");
__device__ __forceinline__ bool Fp4KeysByTable(const IndexerTopKParams& p) {
  const qc::PackedRow& f = p.key_format;
  return p.head_dim == kFp4FastDim && f.kind == qc::Kind::kFp4Pow2 && f.q == kFp4FastDim &&
         f.block == 32 && f.tail == 0;
}
__device__ __forceinline__ uint32_t Bf16x2Mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Rows [0, rows) of keys ([rows][kTcKeyWords] bf16 pairs) from the packed entries entry_ptr[e]
// (PackedLoad4's values, exact in bf16), zeros from row n_valid on; by the whole block. fp4_pairs:
// qc::E2m1PairBf16's table in shared memory (used where Fp4KeysByTable).
__device__ __forceinline__ void TcDecodeKeys(const IndexerTopKParams& p,
                                             const void* const* entry_ptr, int n_valid, int rows,
                                             uint32_t* keys, const uint32_t* fp4_pairs) {
  if (Fp4KeysByTable(p)) {
    constexpr int kGroups = kFp4FastDim / 4, kCodeBytes = kFp4FastDim / 2;
    for (int i = threadIdx.x; i < rows * kGroups; i += kTcThreads) {
      const int e = i / kGroups, c = (i % kGroups) * 4;
      uint2 w = make_uint2(0u, 0u);
      if (e < n_valid) {
        const auto* row = static_cast<const uint8_t*>(entry_ptr[e]);
        const uint32_t b = row[kCodeBytes + c / 32];
        if (b - qc::kE2m1PairExactLo <= qc::kE2m1PairExactHi - qc::kE2m1PairExactLo) {
          const uint32_t codes = *reinterpret_cast<const uint16_t*>(row + c / 2);
          const uint32_t s2 = (b << 7) * 0x10001u;  // (s, s) in bf16
          w = make_uint2(Bf16x2Mul(fp4_pairs[codes & 0xFFu], s2),
                         Bf16x2Mul(fp4_pairs[codes >> 8], s2));
        } else {
          w = Bf16Quad(PackedLoad4(p.key_format, row, c));
        }
      }
      *reinterpret_cast<uint2*>(keys + e * kTcKeyWords + c / 2) = w;
    }
    return;
  }
  const int groups = p.head_dim / 4;
  for (int i = threadIdx.x; i < rows * groups; i += kTcThreads) {
    const int e = i / groups, c = (i % groups) * 4;
    *reinterpret_cast<uint2*>(keys + e * kTcKeyWords + c / 2) = Bf16Quad(
        e < n_valid ? PackedLoad4(p.key_format, entry_ptr[e], c) : make_float4(0, 0, 0, 0));
  }
}

template <int kPasses>
__global__ void __launch_bounds__(kTcThreads)
    IndexerScoreTcKernel(IndexerTopKParams p, int64_t cap) {
  PdlTrigger();
  PdlWait();
  __shared__ __align__(16) uint32_t keys[kTcPass * kTcKeyWords];
  __shared__ float qs[kTcQuarters * kTcPass];
  __shared__ const void* entry_ptr[kTcPass];
  __shared__ uint32_t fp4_pairs[256];
  fp4_pairs[threadIdx.x] = qc::E2m1PairBf16(threadIdx.x);  // (read after the barrier below)
  const int64_t t = blockIdx.y;
  const int pos = p.meta.pos[t];
  const int visible = (pos + 1) / p.rate;
  const int k = min(p.topk, visible);
  const int w_begin = blockIdx.x * (kTcPass * kPasses);
  if (k == visible || w_begin >= visible) return;
  const TcWarp tw(p);
  uint32_t a[kTcMaxKSteps][4];
  tw.Queries(p.q + t * tw.H * tw.Dh, a);
  const float w0 = tw.Weight(p, t, tw.h0), w1 = tw.Weight(p, t, tw.h1);
  const float softmax_scale = SoftmaxScale(tw.Dh);
  for (int pass = 0; pass < kPasses; ++pass) {
    const int e0 = w_begin + pass * kTcPass;
    if (e0 >= visible) break;
    const int ne = min(kTcPass, visible - e0);
    if (threadIdx.x < ne) entry_ptr[threadIdx.x] = p.keys.Entry(p.meta.slot[t], e0 + threadIdx.x);
    __syncthreads();  // (also: the previous pass's scores are done with qs)
    TcDecodeKeys(p, entry_ptr, ne, kTcPass, keys, fp4_pairs);
    __syncthreads();
    tw.QuarterSums(keys, a, softmax_scale, w0, w1, qs);
    __syncthreads();
    if (threadIdx.x < ne) p.scores[t * cap + e0 + threadIdx.x] = TcWarp::Score(qs, threadIdx.x);
  }
}

// Many rows (IndexerTopKParams::tc_runs_min_rows): block (tile, group) scores entries
// [tile * kTcRunEntries, + kTcRunEntries) for kTcRunTokens consecutive rows. Within a run of rows
// of one slot (a prefill's rows: the same compressed keys) the entries are decoded once, up to the
// run's largest visible count, and every row of the run scores from them: a row alone decodes the
// same keys again, about as many instructions a pass as its mma steps (counted from the code, not
// yet profiled). Each score is IndexerScoreTcKernel's (QuarterSums, Score): the same bits. The
// quarter sums alternate between two buffers so that a pass's scores overlap the next pass's mma
// steps.
constexpr int kTcRunTokens = 16;
constexpr int kTcRunPasses = 4;
constexpr int kTcRunEntries = kTcRunPasses * kTcPass;
constexpr size_t TcRunSmemBytes() {
  return static_cast<size_t>(kTcRunEntries) * kTcKeyWords * 4 +
         2 * static_cast<size_t>(kTcQuarters) * kTcPass * 4 + kTcRunEntries * sizeof(void*) +
         256 * 4;
}

// Three blocks an SM (73 KB of shared memory each; 80 registers). One H100 (c46e, c46f, session
// 46), the 8,192-token prefill: 4 rows a block 1452.5 us, 8 rows 1238.6, 3 blocks an SM 1194.0,
// 16 rows and 3 blocks 1061.3; on one machine (c46i, c46j) 1063.3 with QuarterSums' k steps at
// compile time, 1205.6 without;
// but the 131,072-token prompt's last chunk is the other way round (its indexer 193.4 ms with
// them, 170.3 without; the prompt 4.717 against 4.522 s), and long prompts are where the
// indexer's time is: so without.
__global__ void __launch_bounds__(kTcThreads, 3)
    IndexerScoreTcRunKernel(IndexerTopKParams p, int64_t cap) {
  PdlTrigger();
  PdlWait();
  extern __shared__ __align__(16) unsigned char run_smem[];
  uint32_t* const keys = reinterpret_cast<uint32_t*>(run_smem);  // [kTcRunEntries][kTcKeyWords]
  float* const qs = reinterpret_cast<float*>(keys + kTcRunEntries * kTcKeyWords);  // [2][..]
  const void** const entry_ptr =
      reinterpret_cast<const void**>(qs + 2 * kTcQuarters * kTcPass);  // [kTcRunEntries]
  uint32_t* const fp4_pairs = reinterpret_cast<uint32_t*>(entry_ptr + kTcRunEntries);  // [256]
  fp4_pairs[threadIdx.x] = qc::E2m1PairBf16(threadIdx.x);  // (read after the barrier below)
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTcRunTokens;
  const int ntok = static_cast<int>(min(static_cast<int64_t>(kTcRunTokens), p.meta.n - t0));
  const int w_begin = blockIdx.x * kTcRunEntries;
  // Row t0 + j's visible entries when it has scores in this block, else 0 (it takes all its
  // entries unscored, or they end before the block's).
  auto scored = [&](int j) {
    const int visible = (p.meta.pos[t0 + j] + 1) / p.rate;
    return min(p.topk, visible) == visible || w_begin >= visible ? 0 : visible;
  };
  const TcWarp tw(p);
  const float softmax_scale = SoftmaxScale(tw.Dh);
  int buf = 0;
  for (int r0 = 0; r0 < ntok;) {  // runs [r0, r1) of one slot (every thread the same)
    const int slot = p.meta.slot[t0 + r0];
    int r1 = r0 + 1, vis_max = scored(r0);
    for (; r1 < ntok && p.meta.slot[t0 + r1] == slot; ++r1) vis_max = max(vis_max, scored(r1));
    if (vis_max > 0) {
      const int n_valid = min(kTcRunEntries, vis_max - w_begin);
      for (int i = threadIdx.x; i < n_valid; i += kTcThreads)
        entry_ptr[i] = p.keys.Entry(slot, w_begin + i);
      __syncthreads();  // (also: every warp's mma steps are done with the previous run's keys)
      TcDecodeKeys(p, entry_ptr, n_valid, (n_valid + kTcPass - 1) / kTcPass * kTcPass, keys,
                   fp4_pairs);
      __syncthreads();
      for (int j = r0; j < r1; ++j) {
        const int visible = scored(j);
        if (visible == 0) continue;
        const int64_t t = t0 + j;
        uint32_t a[kTcMaxKSteps][4];
        tw.Queries(p.q + t * tw.H * tw.Dh, a);
        const float w0 = tw.Weight(p, t, tw.h0), w1 = tw.Weight(p, t, tw.h1);
        for (int pass = 0; pass < kTcRunPasses; ++pass) {
          const int e0 = w_begin + pass * kTcPass;
          if (e0 >= visible) break;
          // Buffer buf's last readers, the scores two passes back, finished before the last
          // barrier.
          float* const qsb = qs + buf * kTcQuarters * kTcPass;
          tw.QuarterSums(keys + pass * kTcPass * kTcKeyWords, a, softmax_scale, w0, w1, qsb);
          __syncthreads();
          const int ne = min(kTcPass, visible - e0);
          if (threadIdx.x < ne)
            p.scores[t * cap + e0 + threadIdx.x] = TcWarp::Score(qsb, threadIdx.x);
          buf ^= 1;
        }
      }
    }
    r0 = r1;
  }
}

// Scores as unsigned keys with the same order (larger score, larger key); -0 counts as +0, as in
// the float comparison of the reference order.
__device__ __forceinline__ uint32_t ScoreKey(float s) {
  if (s == 0.0f) s = 0.0f;
  const uint32_t u = __float_as_uint(s);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the block in thread order; `scratch` holds >= 33 ints. Every
// thread must call it.
__device__ __forceinline__ int BlockExclusiveScan(int v, int* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  int inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int w = lane < nw ? scratch[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    if (lane < nw) scratch[lane] = w;  // inclusive warp totals
  }
  __syncthreads();
  const int before = (warp > 0 ? scratch[warp - 1] : 0) + inc - v;
  __syncthreads();
  return before;
}

// Radix select over the keys key[w], w < count, for which eligible(w) holds: the kk-th largest
// (four 8-bit digits, a shared histogram each). Leaves the k-th key in *s_prefix and how many keys
// equal to it are selected (the lowest-index ones) in *s_kk. kk <= eligible keys. Every thread
// calls it.
template <typename Eligible>
__device__ __forceinline__ void RadixSelect(const uint32_t* key, int count, int kk0,
                                            Eligible eligible, int* hist, uint32_t* s_prefix,
                                            int* s_kk) {
  if (threadIdx.x == 0) {
    *s_prefix = 0;
    *s_kk = kk0;
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = *s_prefix;
    for (int w = threadIdx.x; w < count; w += blockDim.x) {
      const uint32_t kv = key[w];
      if ((kv & mask) == prefix && eligible(w)) atomicAdd(&hist[(kv >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l owns bins 255 - 8l down to 248 - 8l (descending); find the bin holding the kk-th.
      const int kk = *s_kk;
      int own = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) own += hist[255 - 8 * lane - b];
      int inc = own;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += y;
      }
      const unsigned hit = __ballot_sync(0xffffffffu, inc >= kk);
      const int first = __ffs(hit) - 1;  // kk <= candidates, so some lane reaches it
      if (lane == first) {
        int above = inc - own;
        for (int b = 0; b < 8; ++b) {
          const int bin = 255 - 8 * lane - b;
          if (above + hist[bin] >= kk) {
            *s_prefix = prefix | (static_cast<uint32_t>(bin) << shift);
            *s_kk = kk - above;
            break;
          }
          above += hist[bin];
        }
      }
    }
    mask |= 255u << shift;
    __syncthreads();
  }
}

// Calls emit(rank, w) for the selected indices w < count in ascending order (rank 0, 1, ...):
// cls(w) 1 = selected, 2 = selected if among the first `take_equal` such indices (the ties at the
// k-th key), 0 = not. Each thread scans a contiguous span of indices, so block scans in thread
// order are index order. Every thread calls it.
template <typename Cls, typename Emit>
__device__ __forceinline__ void CompactInOrder(int count, Cls cls, int take_equal,
                                               int* scan_scratch, Emit emit) {
  const int span = (count + blockDim.x - 1) / blockDim.x;
  const int w0 = min(count, static_cast<int>(threadIdx.x) * span), w1 = min(count, w0 + span);
  int eq = 0;
  for (int w = w0; w < w1; ++w) eq += cls(w) == 2;
  int eq_rank = BlockExclusiveScan(eq, scan_scratch);
  int mine = 0;
  for (int w = w0, r = eq_rank; w < w1; ++w) {
    const int c = cls(w);
    if (c == 1)
      ++mine;
    else if (c == 2)
      mine += r++ < take_equal;
  }
  int out = BlockExclusiveScan(mine, scan_scratch);
  for (int w = w0; w < w1; ++w) {
    const int c = cls(w);
    bool take = c == 1;
    if (c == 2) take = eq_rank++ < take_equal;
    if (take) emit(out++, w);
  }
}

// The top k of the visible entries under the reference order (score descending, index ascending
// on ties), written in ascending index order: a radix select finds the k-th key, then entries
// above it, and the lowest-index ones equal to it, are compacted in index order. The same set as
// sorting by that order, in a few barriers instead of ~100. V4.1: first the candidate blocks
// (candidates_out, the same select over the block scores), then the top-k restricted to the
// blocks marked in candidates_in.
__global__ void __launch_bounds__(kThreads) IndexerTopKKernel(IndexerTopKParams p, int64_t cap) {
  PdlTrigger();
  PdlWait();
  extern __shared__ float smem[];
  __shared__ int hist[256];
  __shared__ int scan_scratch[33];
  __shared__ uint32_t s_prefix;
  __shared__ int s_kk, s_count;
  const int64_t t = blockIdx.x;
  const int pos = p.meta.pos[t];
  const int visible = (pos + 1) / p.rate;
  const int k = min(p.topk, visible);
  int32_t* sel = p.sel + t * p.topk;
  const float* scores = p.scores + t * cap;
  uint32_t* key = reinterpret_cast<uint32_t*>(smem);  // [visible] (first [blocks] in level one)
  const int bs = p.candidate_block_size;
  if (p.candidates_out != nullptr && bs > 0) {
    uint8_t* mark = p.candidates_out + t * p.candidate_stride;
    const int blocks = (visible + bs - 1) / bs;
    if (blocks <= p.candidate_topk_blocks) {
      for (int b = threadIdx.x; b < p.candidate_stride; b += blockDim.x) mark[b] = b < blocks;
    } else {
      for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
        float m = -INFINITY;
        for (int e = b * bs; e < min(visible, b * bs + bs); ++e) m = fmaxf(m, scores[e]);
        key[b] = ScoreKey(b == blocks - 1 ? INFINITY : m);
      }
      for (int b = threadIdx.x; b < p.candidate_stride; b += blockDim.x) mark[b] = 0;
      __syncthreads();
      RadixSelect(
          key, blocks, p.candidate_topk_blocks, [](int) { return true; }, hist, &s_prefix, &s_kk);
      const uint32_t kth = s_prefix;
      CompactInOrder(
          blocks, [&](int b) { return key[b] > kth ? 1 : (key[b] == kth ? 2 : 0); }, s_kk,
          scan_scratch, [&](int, int b) { mark[b] = 1; });
    }
    __syncthreads();  // the marks (candidates_in may be the same array) and key[] free again
  }
  const uint8_t* marked =
      p.candidates_in != nullptr && bs > 0 ? p.candidates_in + t * p.candidate_stride : nullptr;
  auto eligible = [&](int w) { return marked == nullptr || marked[w / bs] != 0; };
  int kk = k;
  if (marked != nullptr) {  // k = min(topk, entries in marked blocks)
    if (threadIdx.x == 0) s_count = 0;
    __syncthreads();
    int mine = 0;
    for (int w = threadIdx.x; w < visible; w += blockDim.x) mine += eligible(w);
    atomicAdd(&s_count, mine);
    __syncthreads();
    kk = min(k, s_count);
  }
  if (threadIdx.x == 0) p.sel_count[t] = kk;
  if (kk == visible) {  // every visible entry is selected; scores cannot change that
    for (int i = threadIdx.x; i < kk; i += blockDim.x) sel[i] = i;
    return;
  }
  if (marked != nullptr && kk == s_count) {  // every marked entry is selected
    CompactInOrder(
        visible, [&](int w) { return eligible(w) ? 1 : 0; }, 0, scan_scratch,
        [&](int r, int w) { sel[r] = w; });
    return;
  }
  for (int w = threadIdx.x; w < visible; w += blockDim.x) key[w] = ScoreKey(scores[w]);
  __syncthreads();
  RadixSelect(key, visible, kk, eligible, hist, &s_prefix, &s_kk);
  const uint32_t kth = s_prefix;
  CompactInOrder(
      visible,
      [&](int w) { return !eligible(w) ? 0 : (key[w] > kth ? 1 : (key[w] == kth ? 2 : 0)); }, s_kk,
      scan_scratch, [&](int r, int w) { sel[r] = w; });
}

// The top-k kernel keeps one 32-bit key per entry in shared memory.
size_t KeySmemBytes(int max_entries) { return static_cast<size_t>(std::max(max_entries, 1)) * sizeof(uint32_t); }

// Block (t, g): heads [g * kRoundHeads, ...) of token t staged in shared memory, RoPE'd, rotated
// and put on the FP4 grid (a warp per block of 32: FqWarpBlock, the serial block's bits), written
// back. Several blocks a token, so that one token's queries spread over SMs (decode).
constexpr int kRoundHeads = 4;
constexpr int kRoundThreads = 128;

__global__ void __launch_bounds__(kRoundThreads) IndexQueryRoundKernel(IndexQueryRoundParams p) {
  PdlTrigger();
  PdlWait();
  extern __shared__ __align__(16) float qs[];
  __shared__ float cs[kMaxRopeHalf][2];
  const int64_t t = blockIdx.x;
  const int h0 = blockIdx.y * kRoundHeads;
  const int H = min(kRoundHeads, p.heads - h0), Dh = p.head_dim, half = p.rope_dim / 2;
  float* q = p.q + (t * p.heads + h0) * Dh;
  for (int i = threadIdx.x; i < H * Dh; i += blockDim.x) qs[i] = q[i];
  RopeTable(p.pos[t], p.inv_freq, half, cs);
  __syncthreads();
  for (int i = threadIdx.x; i < H * half; i += blockDim.x) {
    const int h = i / half, j = i % half;
    float* v = qs + h * Dh + (Dh - p.rope_dim) + 2 * j;
    RotateWith(v[0], v[1], cs[j][0], cs[j][1], false);
  }
  __syncthreads();
  FqHadamardRows(qs, H, Dh);                // (synchronizes)
  if (p.fp4_block == 32 && Dh % 32 == 0) {  // a warp per block, each lane one value
    const int lane = threadIdx.x % 32;
    for (int b = threadIdx.x / 32; b * 32 < H * Dh; b += blockDim.x / 32) {
      float* v = qs + b * 32 + lane;
      *v = FqWarpBlock(*v, 32, FakeQuant::kFp4Pow2);
    }
    __syncthreads();
  } else if (p.fp4_block > 0 && Dh % p.fp4_block == 0) {
    const int nb = Dh / p.fp4_block;
    for (int i = threadIdx.x; i < H * nb; i += blockDim.x)
      FqBlockSerial(qs + (i / nb) * Dh + (i % nb) * p.fp4_block, p.fp4_block, FakeQuant::kFp4Pow2);
    __syncthreads();
  }
  for (int i = threadIdx.x; i < H * Dh; i += blockDim.x) q[i] = qs[i];
}

}  // namespace

Status IndexQueryRoundParams::Validate() const {
  if (heads < 1 || head_dim < 1 || head_dim > 2048 || rope_dim % 2 != 0 || rope_dim > head_dim ||
      rope_dim / 2 > kMaxRopeHalf || fp4_block < 0) {
    return Unimplemented("indexer query rounding: " + std::to_string(heads) + " heads of " +
                         std::to_string(head_dim) + ", rope_dim " + std::to_string(rope_dim) +
                         " (head_dim at most 2,048, rope_dim even and at most " +
                         std::to_string(2 * kMaxRopeHalf) + ")");
  }
  return Status::Ok();
}

void LaunchIndexQueryRound(const IndexQueryRoundParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  const size_t smem = static_cast<size_t>(std::min(p.heads, kRoundHeads)) * p.head_dim * 4;
  const unsigned groups = static_cast<unsigned>((p.heads + kRoundHeads - 1) / kRoundHeads);
  LaunchKernel(IndexQueryRoundKernel, dim3(static_cast<unsigned>(p.n), groups), dim3(kRoundThreads),
               smem, stream, p);
  CUDA_CHECK_LAUNCH();
}

Status IndexerTopKParams::Validate() const {
  if (heads < 1 || heads > kMaxHeads) {
    return Unimplemented("indexer: " + std::to_string(heads) +
                         " index heads (the kernel takes 1.." + std::to_string(kMaxHeads) + ")");
  }
  if (head_dim % 4 != 0) {
    return Unimplemented("indexer: index_head_dim " + std::to_string(head_dim) +
                         " must be a multiple of 4");
  }
  if (rope_dim / 2 > kMaxRopeHalf || rope_dim > head_dim || rope_dim % 2 != 0) {
    return Unimplemented("indexer: rope_dim " + std::to_string(rope_dim) +
                         " must be even, at most " + std::to_string(2 * kMaxRopeHalf) +
                         " and at most index_head_dim");
  }
  if (query_fp4_block < 0) return InvalidArgument("indexer: query_fp4_block < 0");
  if (key_format.packed() &&
      (key_format.q != head_dim || key_format.tail != 0 || key_format.block % 4 != 0 ||
       key_format.q % key_format.block != 0 || keys.width < key_format.floats())) {
    return InvalidArgument(
        "indexer: packed keys must be rows of head_dim coded values (blocks of "
        "4k) in entries a packed row wide");
  }
  if (tensor_core_min_rows < 0 || tc_runs_min_rows < 0)
    return InvalidArgument("indexer: tensor_core_min_rows or tc_runs_min_rows < 0");
  if (tensor_core_min_rows > 0 &&
      (!fp4_blocks || !key_format.packed() || key_format.kind != qc::Kind::kFp4Pow2 ||
       key_format.block != 32 || rope_dim != 0 || query_fp4_block != 0 || head_dim % 32 != 0 ||
       head_dim > 16 * kTcMaxKSteps || candidates_out != nullptr || candidates_in != nullptr)) {
    return Unimplemented(
        "indexer on the tensor cores: needs fp4_blocks with packed FP4 keys in blocks of 32, "
        "rounded queries (rope_dim 0, no query_fp4_block), no candidate blocks and head_dim a "
        "multiple of 32 up to " +
        std::to_string(16 * kTcMaxKSteps) + " (head_dim " + std::to_string(head_dim) + ")");
  }
  if (candidates_out != nullptr || candidates_in != nullptr) {
    if (candidate_block_size < 1 ||
        candidate_stride < (max_entries + candidate_block_size - 1) / candidate_block_size ||
        (candidates_out != nullptr && candidate_topk_blocks < 1)) {
      return InvalidArgument("indexer: candidate blocks of " +
                             std::to_string(candidate_block_size) + " entries, stride " +
                             std::to_string(candidate_stride) + " for " +
                             std::to_string(max_entries) + " entries, top " +
                             std::to_string(candidate_topk_blocks) + " blocks");
    }
  }
  return Status::Ok();
}

bool IndexerTensorCoresFit(const IndexerTopKParams& p) {
  IndexerTopKParams t = p;
  t.tensor_core_min_rows = 1;
  return p.Validate().ok() && t.Validate().ok();
}

namespace {
// IndexerScoreTcRunKernel's shared memory (above the default 48 KB), once.
void AllowTcRunSmem() {
  static const bool done = [] {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerScoreTcRunKernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(TcRunSmemBytes())));
    return true;
  }();
  (void)done;
}
}  // namespace

void PrepareIndexerTopK(int heads, int head_dim, int max_entries) {
  AllowTcRunSmem();
  const size_t smem = KeySmemBytes(max_entries);
  if (smem > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerTopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  }
  const size_t ss = ScoreSmemBytes(heads, head_dim, 32);
  if (ss > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerScoreKernel<32, 8>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(ss)));
  }
  const size_t sn = ScoreSmemBytes(heads, head_dim, 8);
  if (sn > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(IndexerScoreKernel<8, 1>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(sn)));
  }
}

void LaunchIndexerTopK(const IndexerTopKParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  DSINFER_CHECK(p.score_rows > 0 && p.scores != nullptr);
  for (int64_t c0 = 0; c0 < p.meta.n; c0 += p.score_rows) {
    // Token chunk [c0, c0 + rows): per-token results do not depend on the chunking.
    IndexerTopKParams q = p;
    const int64_t rows = std::min<int64_t>(p.score_rows, p.meta.n - c0);
    q.meta.n = rows;
    q.meta.pos += c0;
    q.meta.slot += c0;
    q.q += c0 * p.heads * p.head_dim;
    q.weights += c0 * p.heads;
    q.sel += c0 * p.topk;
    q.sel_count += c0;
    if (q.candidates_out != nullptr) q.candidates_out += c0 * p.candidate_stride;
    if (q.candidates_in != nullptr) q.candidates_in += c0 * p.candidate_stride;
    // A few tokens: 8-entry tiles (decode: ~4x the blocks); else 32-entry tiles. The tensor
    // cores: 64 entries a block for a few tokens, else 256.
    auto score = [&](auto kernel, int entries, int threads) {
      const int64_t tiles = (p.max_entries + entries - 1) / entries;
      LaunchKernel(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(rows)),
                   dim3(threads), ScoreSmemBytes(p.heads, p.head_dim, entries), stream, q,
                   int64_t{p.max_entries});
    };
    if (p.tensor_core_min_rows > 0 && rows >= p.tensor_core_min_rows && p.tc_runs_min_rows > 0 &&
        rows >= p.tc_runs_min_rows && p.longest_run >= kTcRunTokens) {
      AllowTcRunSmem();
      const int64_t tiles = (p.max_entries + kTcRunEntries - 1) / kTcRunEntries;
      const dim3 grid(static_cast<unsigned>(tiles),
                      static_cast<unsigned>((rows + kTcRunTokens - 1) / kTcRunTokens));
      LaunchKernel(IndexerScoreTcRunKernel, grid, dim3(kTcThreads), TcRunSmemBytes(), stream, q,
                   int64_t{p.max_entries});
    } else if (p.tensor_core_min_rows > 0 && rows >= p.tensor_core_min_rows) {  // (static smem)
      const int entries = rows <= 4 ? kTcPass : 4 * kTcPass;
      const int64_t tiles = (p.max_entries + entries - 1) / entries;
      const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(rows));
      if (rows <= 4)
        LaunchKernel(IndexerScoreTcKernel<1>, grid, dim3(kTcThreads), 0, stream, q,
                     int64_t{p.max_entries});
      else
        LaunchKernel(IndexerScoreTcKernel<4>, grid, dim3(kTcThreads), 0, stream, q,
                     int64_t{p.max_entries});
    } else if (rows <= 4) {
      score(IndexerScoreKernel<8, 1>, 8, NarrowTile::kThreads);
    } else {
      score(IndexerScoreKernel<32, 8>, 32, WideTile::kThreads);
    }
    CUDA_CHECK_LAUNCH();
    LaunchKernel(IndexerTopKKernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), KeySmemBytes(p.max_entries), stream, q, p.max_entries);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace dsinfer::backend::cuda
