#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/engram.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/launch.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMaxNgram = 16;

// Thread (t, l): the hash ids of row t's layer l, as EngramHasher::Hash.
__global__ void EngramHashKernel(EngramHashParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.meta.n * p.layers) return;
  const int64_t t = i / p.layers;
  const int l = static_cast<int>(i % p.layers);
  const int pos = p.meta.pos[t], seg_start = p.meta.seg_start[t], seg_begin = p.meta.seg_begin[t];
  int64_t tokens[kMaxNgram];
  for (int k = 0; k < p.max_ngram; ++k) {
    const int q = pos - k;
    if (q < 0) {
      tokens[k] = p.pad_id;  // and every k after it
      continue;
    }
    const int32_t id = q >= seg_start ? p.meta.ids[seg_begin + q - seg_start]
                                      : __float_as_int(*p.tokens.Row(p.meta.slot[t], q));
    tokens[k] = id >= 0 && id < p.vocab ? p.token_map[id] : p.pad_id;
  }
  const int C = (p.max_ngram - 1) * p.n_heads;
  const int64_t* mult = p.multipliers + static_cast<int64_t>(l) * p.max_ngram;
  const int64_t* primes = p.primes + static_cast<int64_t>(l) * C;
  const int64_t* offsets = p.offsets + static_cast<int64_t>(l) * C;
  int64_t* out = p.hash_ids + (t * p.layers + l) * C;
  // int64 products wrap as two's complement (the CPU's products stay below 2^63: every multiplier
  // is < INT64_MAX / compressed vocab).
  auto mul = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  };
  int64_t rolling = mul(tokens[0], mult[0]);
  for (int k = 1; k < p.max_ngram; ++k) {
    rolling ^= mul(tokens[k], mult[k]);
    for (int h = 0; h < p.n_heads; ++h) {
      const int c = (k - 1) * p.n_heads + h;
      out[c] = rolling % primes[c] + offsets[c];  // C++ semantics: the sign of the dividend
    }
  }
}

// Thread i: value j of column c of row t (i = (t * cols + c) * dim + j).
__global__ void EngramGatherKernel(EngramGatherParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = p.cols * p.dim;
  if (i >= p.n * per_row) return;
  const int64_t t = i / per_row, c = (i % per_row) / p.dim, j = i % p.dim;
  const int64_t r = p.hash_ids[t * p.hash_stride + c];
  float v;
  switch (p.table_format) {
    case 0:
      v = static_cast<const float*>(p.table)[r * p.dim + j];
      break;
    case 1:
      v = __uint_as_float(
          static_cast<uint32_t>(static_cast<const uint16_t*>(p.table)[r * p.dim + j]) << 16);
      break;
    default:
      v = __fmul_rn(qc::E4m3ToFloat(static_cast<const uint8_t*>(p.table)[r * p.dim + j]),
                    p.scale[r * (p.dim / 32) + j / 32]);
  }
  p.out[i] = v;
}

constexpr int kGateThreads = 256;

// Block (s, t): stream s of row t.
__global__ void __launch_bounds__(kGateThreads) EngramGateKernel(EngramGateParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ double scratch[32];
  const int s = blockIdx.x;
  const int64_t t = blockIdx.y, D = p.D;
  float* h = p.X + (t * p.hc + s) * D;
  const float* key = p.kv + t * (p.hc + 1) * D;
  const float* k = key + s * D;
  const float* value = key + p.hc * D;
  const float* wq = p.qk_weight + s * D;
  double hh = 0.0, kk = 0.0, dot = 0.0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float hv = h[i], kv = k[i];
    hh += static_cast<double>(hv) * hv;
    kk += static_cast<double>(kv) * kv;
    dot += static_cast<double>(__fmul_rn(__fmul_rn(hv, wq[i]), kv));
  }
  hh = BlockSum(hh, scratch);
  kk = BlockSum(kk, scratch);
  dot = BlockSum(dot, scratch);
  const double Dd = static_cast<double>(D);
  const float rstd =
      __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(hh / Dd), p.eps))),
                __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(kk / Dd), p.eps))));
  const float inv_sqrt_d = static_cast<float>(1.0 / sqrt(Dd));
  const float d = __fmul_rn(__fmul_rn(static_cast<float>(dot), rstd), inv_sqrt_d);
  const float mag = __fsqrt_rn(fmaxf(fabsf(d), 1e-6f));
  const float gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-copysignf(mag, d))));
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    h[i] = __fadd_rn(h[i], __fmul_rn(gate, value[i]));
}

}  // namespace

Status EngramHashParams::Validate() const {
  if (vocab < 1) return InvalidArgument("engram hash: vocab must be > 0");
  if (max_ngram < 2 || max_ngram > kMaxNgram || n_heads < 1 || layers < 1) {
    return Unimplemented("engram hash: max_ngram " + std::to_string(max_ngram) + " (2.." +
                         std::to_string(kMaxNgram) + "), n_heads " + std::to_string(n_heads) +
                         ", layers " + std::to_string(layers) + " (>= 1)");
  }
  return Status::Ok();
}

Status EngramGatherParams::Validate() const {
  if (cols < 1 || dim < 1 || table_format < 0 || table_format > 2) {
    return InvalidArgument("engram gather: cols " + std::to_string(cols) + ", dim " +
                           std::to_string(dim) + ", table_format " + std::to_string(table_format));
  }
  if (table_format == 2 && (dim % 32 != 0 || scale == nullptr)) {
    return InvalidArgument("engram gather: e4m3 rows need dim % 32 == 0 and fp32 scales");
  }
  return Status::Ok();
}

Status EngramGateParams::Validate() const {
  if (hc < 1 || D < 1) {
    return InvalidArgument("engram gate: hc " + std::to_string(hc) + ", D " + std::to_string(D));
  }
  return Status::Ok();
}

void LaunchEngramHash(const EngramHashParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  constexpr int kThreads = 128;
  const int64_t total = p.meta.n * p.layers;
  LaunchKernel(EngramHashKernel, dim3(static_cast<unsigned>((total + kThreads - 1) / kThreads)),
               dim3(kThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchEngramGather(const EngramGatherParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  constexpr int kThreads = 256;
  const int64_t total = p.n * p.cols * p.dim;
  LaunchKernel(EngramGatherKernel, dim3(static_cast<unsigned>((total + kThreads - 1) / kThreads)),
               dim3(kThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchEngramGate(const EngramGateParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(EngramGateKernel, dim3(static_cast<unsigned>(p.hc), static_cast<unsigned>(p.n)),
               dim3(kGateThreads), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
