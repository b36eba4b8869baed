#include <string>

#include "backend/cuda/attention_query.cuh"
#include "backend/cuda/attention_sparse.cuh"
#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kWarps = 16;
constexpr int kU = 4;                       // keys per warp loaded together
constexpr int kMaxPerLane = kQueryPerLane;  // dim <= 512

// G heads per block (one token's heads h0 .. h0 + G - 1). Every (head, warp) pair runs the same
// operations whatever G: warp w takes the key spans of warp w for each of the G heads in turn, so
// a span's keys are loaded once for G heads (the key rows are what the kernel streams: G = 1
// reads them once per head). G = 1 keeps the query and the output accumulator in registers; G > 1
// keeps the G queries and each (warp, head)'s accumulator in shared memory (dyn, below).
template <int G, bool kPacked>
__global__ void __launch_bounds__(kWarps * 32) SparseAttentionKernel(SparseAttentionParams p) {
  PdlTrigger();
  const int groups = p.heads / G;
  const int h0 = static_cast<int>(blockIdx.x % groups) * G;
  // Constant weights before the wait (the launch contract allows them): the heads' sinks and the
  // RoPE frequencies this thread uses (the query's rope columns of its lane; the output's pair
  // threadIdx.x), which would otherwise each cost a memory round trip on the critical path.
  float sink[G];
#pragma unroll
  for (int g = 0; g < G; ++g) sink[g] = p.sink[h0 + g];
  float q_freq[kQueryPerLane / 2];
  QueryRopeFreqs(p, q_freq);
  const float out_freq =
      static_cast<int>(threadIdx.x) < p.rope_dim / 2 ? p.inv_freq[threadIdx.x] : 0.0f;
  PdlWait();
  __shared__ float part_m[kWarps][G], part_l[kWarps][G];
  __shared__ __align__(16) float out_row[512];
  // G = 1: [kWarps][512] the warps' partial outputs. G > 1: [G][512] the queries, then
  // [kWarps][G][512] the (warp, head) accumulators.
  extern __shared__ __align__(16) float dyn[];
  float* const qs = dyn;
  float* const os = G == 1 ? dyn : dyn + G * 512;
  auto part_o = [&](int w, int g) { return os + (w * G + g) * 512; };
  const int64_t t = blockIdx.x / groups;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int pos = p.meta.pos[t], slot = p.meta.slot[t];
  const int seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  const int dim = p.dim;
  const int n_win = min(p.window_size, pos + 1);
  int n_comp = 0;
  if (p.rate > 0) n_comp = p.sel ? p.sel_count[t] : (pos + 1) / p.rate;
  const int n_keys = n_win + n_comp;

  // Lane l holds elements 4l + 128v + {0..3} (v < 4): one 16-byte load per v.
  // The query of head h (its per-head RMSNorm (no weight) and RoPE applied here if asked).
  auto load_q = [&](int h, float(&q)[kMaxPerLane]) {
    LoadQuery(p, p.q + (t * p.heads + h) * dim, true, pos, q_freq, q);
  };
  // The lane's 16 values of a 512-float shared row.
  auto row_in = [&](const float* r, float(&x)[kMaxPerLane]) {
#pragma unroll
    for (int v = 0; v < kMaxPerLane / 4; ++v) {
      const float4 a = *reinterpret_cast<const float4*>(r + 4 * lane + 128 * v);
      x[4 * v] = a.x;
      x[4 * v + 1] = a.y;
      x[4 * v + 2] = a.z;
      x[4 * v + 3] = a.w;
    }
  };
  auto row_out = [&](float* r, const float(&x)[kMaxPerLane]) {
#pragma unroll
    for (int v = 0; v < kMaxPerLane / 4; ++v)
      *reinterpret_cast<float4*>(r + 4 * lane + 128 * v) =
          make_float4(x[4 * v], x[4 * v + 1], x[4 * v + 2], x[4 * v + 3]);
  };

  float q[kMaxPerLane], o[kMaxPerLane];  // G = 1: the head's query and accumulator
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) o[i] = 0.0f;
  if constexpr (G == 1) {
    load_q(h0, q);
  } else {
    if (warp < G) {  // warp g: head h0 + g's query (every warp of G = 1 computes these bits)
      load_q(h0 + warp, q);
      row_out(qs + warp * 512, q);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) row_out(part_o(warp, g), o);
    __syncthreads();
  }
  // Warp w takes keys [kU·w, kU·w + kU), then the same span kWarps·kU further on, ...: the kU keys
  // of a span are loaded together (kU loads in flight per lane), scored together, and folded into
  // the warp's online softmax in one step. The split depends only on the key index (not on the
  // batch).
  const float* window = n_win > 0 ? p.window.Base(slot) : nullptr;  // the sequence's ring
  auto key_ptr = [&](int j) {
    return KeyRowPtr(p, t, j, pos, n_win, slot, seg_start, seg_begin, window);
  };
  float m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  for (int j0 = warp * kU; j0 < n_keys; j0 += kWarps * kU) {
    float kr[kU][kMaxPerLane];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const bool ok = j0 + u < n_keys;  // past the last key: zeros (weight 0 below)
      const float* key = ok ? key_ptr(j0 + u) : nullptr;
#pragma unroll
      for (int v = 0; v < kMaxPerLane / 4; ++v) {
        const int c = 4 * lane + 128 * v;
        const float4 a = ok && c < dim ? LoadKey4<kPacked>(p, key, c) : make_float4(0, 0, 0, 0);
        kr[u][4 * v] = a.x;
        kr[u][4 * v + 1] = a.y;
        kr[u][4 * v + 2] = a.z;
        kr[u][4 * v + 3] = a.w;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if constexpr (G > 1) {
        row_in(qs + g * 512, q);
        row_in(part_o(warp, g), o);
      }
      // The span's kU scores together (their warp sums interleaved), then one online-softmax
      // step for the span, its keys folded in key order.
      float z[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i) dot = fmaf(q[i], kr[u][i], dot);
        z[u] = dot;
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int u = 0; u < kU; ++u) z[u] += __shfl_xor_sync(0xffffffffu, z[u], off);
      float m_new = m[g];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        z[u] = j0 + u < n_keys ? z[u] * p.scale : -INFINITY;
        m_new = fmaxf(m_new, z[u]);
      }
      const float corr = expf(m[g] - m_new);  // m = -inf first: corr = 0
      float e[kU];
      l[g] *= corr;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        e[u] = expf(z[u] - m_new);  // a key past the end: 0
        l[g] += e[u];
      }
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        float acc = o[i] * corr;
#pragma unroll
        for (int u = 0; u < kU; ++u) acc = fmaf(e[u], kr[u][i], acc);
        o[i] = acc;
      }
      m[g] = m_new;
      if constexpr (G > 1) row_out(part_o(warp, g), o);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      part_m[warp][g] = m[g];
      part_l[warp][g] = l[g];
    }
  }
  if constexpr (G == 1) row_out(part_o(warp, 0), o);
  __syncthreads();
  const int half = p.rope_dim / 2, off = dim - p.rope_dim;
#pragma unroll 1
  for (int g = 0; g < G; ++g) {
    const int h = h0 + g;
    float M = sink[g];
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_m[w][g]);
    float den = expf(sink[g] - M);
    for (int w = 0; w < kWarps; ++w)
      if (part_m[w][g] != -INFINITY) den += part_l[w][g] * expf(part_m[w][g] - M);
    const float inv = 1.0f / den;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
      float s = 0.0f;
      for (int w = 0; w < kWarps; ++w)
        if (part_m[w][g] != -INFINITY) s += part_o(w, g)[c] * expf(part_m[w][g] - M);
      out_row[c] = s * inv;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < half; j += blockDim.x) {  // j < blockDim: out_freq is inv_freq[j]
      RotatePair(out_row[off + 2 * j], out_row[off + 2 * j + 1], pos,
                 j == static_cast<int>(threadIdx.x) ? out_freq : p.inv_freq[j], true);
    }
    __syncthreads();
    if (p.out_c == nullptr) {
      float* orow = p.out + (t * p.heads + h) * dim;
      for (int c = threadIdx.x; c < dim; c += blockDim.x) orow[c] = out_row[c];
    }
    // (warp b: act_quant block b of the head, as f16 codes and / or the mode's e4m3 codes)
    if ((p.out_q != nullptr || p.out_c != nullptr) && warp < dim / qcore::kQb) {
      const int c = warp * qcore::kQb + 4 * lane;
      const float4 v = *reinterpret_cast<const float4*>(&out_row[c]);
      const int64_t col = static_cast<int64_t>(h) * dim + c;
      float sc;
      if (p.out_q != nullptr) {
        const uint2 qv = qcore::QuantBlock(v, &sc);
        *reinterpret_cast<uint2*>(p.out_q + t * p.out_ldq + col) = qv;
        if (lane == 0) p.out_s[t * p.out_lds + col / qcore::kQb] = sc;
      }
      if (p.out_c != nullptr) {
        const uint32_t codes = qcore::QuantBlockCodes(v, &sc);
        *reinterpret_cast<uint32_t*>(p.out_c + t * p.out_ldc + col) = codes;
        if (lane == 0) p.out_cs[(col / qcore::kQb) * p.out_ldcs + t] = sc;
      }
    }
    __syncthreads();  // out_row is the next head's
  }
}

template <int G>
void LaunchSparse(const SparseAttentionParams& p, StreamHandle stream) {
  constexpr size_t kSmem = (G == 1 ? kWarps * 512 : G * 512 + kWarps * G * 512) * sizeof(float);
  static const bool attr_set = [&] {
    for (auto k : {SparseAttentionKernel<G, false>, SparseAttentionKernel<G, true>})
      CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  auto kernel =
      p.kv_format.packed() ? SparseAttentionKernel<G, true> : SparseAttentionKernel<G, false>;
  (void)attr_set;
  LaunchKernel(kernel, dim3(static_cast<unsigned>(p.meta.n * (p.heads / G))), dim3(kWarps * 32),
               kSmem, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

Status SparseAttentionParams::Validate() const {
  if (dim > 512 || dim % 4 != 0) {  // 16-byte rows (every V4 head_dim)
    return Unimplemented("sparse attention: head_dim " + std::to_string(dim) +
                         " (the kernel takes multiples of 4 up to 512)");
  }
  if ((out_q != nullptr || out_c != nullptr) && dim % qcore::kQb != 0) {  // whole blocks per head
    return Unimplemented("sparse attention: a quantized output needs head_dim % 128 == 0, not " +
                         std::to_string(dim));
  }
  if (out_c != nullptr &&
      (out_cs == nullptr || out_ldc < int64_t{heads} * dim || out_ldc % 16 != 0 ||
       out_ldcs < meta.n || reinterpret_cast<uintptr_t>(out_c) % 16 != 0)) {
    return InvalidArgument("sparse attention: the output codes' layout (out_ldc " +
                           std::to_string(out_ldc) + ", out_ldcs " + std::to_string(out_ldcs) +
                           ")");
  }
  if (kv_format.packed() &&
      (!kv_format.fp8() || kv_format.q + kv_format.tail != dim || kv_format.q % 8 != 0 ||
       kv_format.block % 4 != 0 || kv_format.q % kv_format.block != 0 ||
       2 * kv_format.floats() > dim || !kv_bf16)) {
    return InvalidArgument(
        "sparse attention: packed K=V rows must be FP8 rows of head_dim values "
        "(codes a multiple of 8, blocks of 4k, at most half the fp32 row) with "
        "kv_bf16 set");
  }
  if (qp_bf16 && (!kv_bf16 || dim % 64 != 0)) {
    return InvalidArgument(
        "sparse attention: bf16 queries and weights (the FP8 cache's attention) need bf16 K=V "
        "values (kv_bf16) and head_dim a multiple of 64 up to 512 (the tensor-core kernel), not " +
        std::to_string(dim));
  }
  if (rope_dim > dim || rope_dim % 2 != 0) {
    return Unimplemented("sparse attention: rope_dim " + std::to_string(rope_dim) +
                         " must be even and at most head_dim");
  }
  if (qp_bf16 && rope_dim > 2 * kMaxRopePairs) {
    return Unimplemented(
        "sparse attention: bf16 queries and weights (the tensor-core kernel) need "
        "rope_dim at most " +
        std::to_string(2 * kMaxRopePairs) + ", not " + std::to_string(rope_dim));
  }
  return Status::Ok();
}

void LaunchSparseAttention(const SparseAttentionParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  // qp_bf16: the tensor-core kernel whatever the choice (the only one computing it; Validate
  // took its shapes).
  const bool tc = p.qp_bf16 || (p.tensor_cores != 0 ? p.tensor_cores > 0
                                                    : GetKernelOptions().AttentionTcFor(p.kv_bf16));
  if (tc && SparseAttentionTcSupports(p)) {  // else the CUDA-core kernel (e.g. head_dim 32)
    LaunchSparseAttentionTc(p, stream);
    return;
  }
  // Heads per block: never a result. Many rows share each block's key loads among 4 heads; few
  // rows keep a block per head (a decode step's few tokens need the blocks to fill the GPU).
  int g = p.heads_per_block;
  if (g == 0) g = GetKernelOptions().attention_heads_per_block;
  if (g == 0) g = p.meta.n >= GetKernelOptions().attention_group_min_rows ? 4 : 1;
  while (g > 1 && p.heads % g != 0) g /= 2;
  if (g >= 4)
    LaunchSparse<4>(p, stream);
  else if (g == 2)
    LaunchSparse<2>(p, stream);
  else
    LaunchSparse<1>(p, stream);
}

}  // namespace dsinfer::backend::cuda
