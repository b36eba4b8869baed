#include <cstdint>
#include <cstdio>
#include <string>

#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/packed_row.cuh"
#include "backend/cuda/qlinear_core.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMaxRopeHalf = 128;

// RMSNorm of one row per block (block-wide fixed-order sum of squares), then, when rope_dim > 0,
// the row's trailing rope pairs rotated from the normalized values in registers (RopeCosSin,
// RotateWith); rows are (token, head). LaunchRmsNorm is the rope_dim = 0 case.
__global__ void RmsNormRopeKernel(RmsNormRopeParams q) {
  PdlTrigger();
  PdlWait();
  __shared__ float scratch[32];
  __shared__ float cs[kMaxRopeHalf][2];
  const RmsNormParams& p = q.norm;
  const int64_t r = blockIdx.x;
  const int half = q.rope_dim / 2;
  if (half > 0) {
    const int pos = q.pos[r / q.heads];
    RopeTable(pos, q.inv_freq, half, cs);
  }
  const float* x = p.x + r * p.ldx;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
  ss = BlockSum(ss, scratch);  // its barriers also publish cs
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(p.dim) + p.eps);
  float* y = p.y + r * p.ldy;
  auto norm = [&](int64_t i) {
    const float v = x[i] * scale;
    return p.weight ? p.weight[i] * v : v;
  };
  const int64_t off = p.dim - q.rope_dim;
  for (int64_t i = threadIdx.x; i < off; i += blockDim.x) y[i] = norm(i);
  const bool kv_round = q.kv_fp8_block > 0;
  const qc::PackedRow pf{qc::Kind::kFp8Pow2, static_cast<int>(off), q.kv_fp8_block, q.rope_dim};
  uint8_t* const packed = q.kv_packed != nullptr
                              ? reinterpret_cast<uint8_t*>(q.kv_packed + r * q.kv_packed_ld)
                              : nullptr;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float a = norm(off + 2 * j), b = norm(off + 2 * j + 1);
    RotateWith(a, b, cs[j][0], cs[j][1], false);
    y[off + 2 * j] = kv_round ? FqRoundBf16(a) : a;
    y[off + 2 * j + 1] = kv_round ? FqRoundBf16(b) : b;
    if (packed != nullptr) {
      PackTailValue(pf, a, 2 * j, packed);
      PackTailValue(pf, b, 2 * j + 1, packed);
    }
  }
  if (!kv_round || off % q.kv_fp8_block != 0) return;
  __syncthreads();  // the row's nope values written
  constexpr int kMaxPerLane = 8;
  const int per_lane = q.kv_fp8_block / 32, lane = threadIdx.x % 32;
  for (int64_t b = threadIdx.x / 32; b * q.kv_fp8_block < off; b += blockDim.x / 32) {
    float* blk = y + b * q.kv_fp8_block;
    float v[kMaxPerLane];
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      if (k < per_lane) {
        v[k] = blk[lane + 32 * k];
        amax = fmaxf(amax, fabsf(v[k]));
      }
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const uint8_t sb = qc::ScaleByte(qc::Kind::kFp8Pow2, amax);
    const float s = qc::ScaleOfByte(qc::Kind::kFp8Pow2, sb);  // FqScale's
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      if (k < per_lane) {
        const uint8_t code = qc::Code(qc::Kind::kFp8Pow2, v[k], s);
        blk[lane + 32 * k] = qc::Mul(qc::ValueOfCode(qc::Kind::kFp8Pow2, code), s);  // FqValue's
        if (packed != nullptr) packed[b * q.kv_fp8_block + lane + 32 * k] = code;
      }
    }
    if (packed != nullptr && lane == 0) packed[pf.scales_at() + b] = sb;
  }
}

// LaunchRmsNorm with quantized rows (RmsNormParams::q): RmsNormRopeKernel's arithmetic (the same
// sum order, scale and products) with each thread's x and weight values loaded once into registers
// up front, the normalized row staged in shared memory, then act_quant per 128 columns by one warp
// each (QuantBlock): one round of global loads on the way instead of three.
constexpr int kQuantPerThread = 8;
constexpr int kQuantMaxDim = kQuantPerThread * 512;

__global__ void RmsNormQuantKernel(RmsNormParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float scratch[32];
  __shared__ __align__(16) float row[kQuantMaxDim];
  const int64_t r = blockIdx.x;
  const float* x = p.x + r * p.ldx;
  float xv[kQuantPerThread], wv[kQuantPerThread];
#pragma unroll
  for (int k = 0; k < kQuantPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    xv[k] = i < p.dim ? x[i] : 0.0f;
    wv[k] = i < p.dim && p.weight ? p.weight[i] : 0.0f;
  }
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kQuantPerThread; ++k)
    if (threadIdx.x + static_cast<int64_t>(k) * blockDim.x < p.dim) ss = fmaf(xv[k], xv[k], ss);
  ss = BlockSum(ss, scratch);  // its barriers also order every x read before the y writes
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(p.dim) + p.eps);
  float* y = p.y + r * p.ldy;
#pragma unroll
  for (int k = 0; k < kQuantPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (i < p.dim) {
      const float v = xv[k] * scale;
      const float o = p.weight ? wv[k] * v : v;
      y[i] = o;
      row[i] = o;
    }
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t b = warp; b * qcore::kQb < p.dim; b += blockDim.x / 32) {
    const int64_t c = b * qcore::kQb + 4 * lane;
    const bool ok = c < p.dim;
    const float4 v =
        ok ? *reinterpret_cast<const float4*>(&row[c]) : make_float4(0.f, 0.f, 0.f, 0.f);
    float sc;
    const uint2 qv = qcore::QuantBlock(v, &sc);
    if (ok) *reinterpret_cast<uint2*>(p.q + r * p.ldq + c) = qv;
    if (lane == 0) p.s[r * p.lds + b] = sc;
  }
}

}  // namespace

Status RmsNormParams::Validate() const {
  if (q != nullptr &&
      (dim % 4 != 0 || dim > static_cast<int64_t>(kQuantPerThread) * NormThreads(dim) ||
       ldq % 4 != 0)) {
    return Unimplemented("rms_norm: quantized rows need dim % 4 == 0 and dim <= " +
                         std::to_string(kQuantPerThread * NormThreads(dim)) + ", not " +
                         std::to_string(dim));
  }
  return Status::Ok();
}

Status RmsNormRopeParams::Validate() const {
  if (rope_dim / 2 > kMaxRopeHalf || rope_dim > norm.dim || rope_dim % 2 != 0 || heads <= 0) {
    return Unimplemented("rms_norm + rope: rope_dim " + std::to_string(rope_dim) +
                         " must be even, at most " + std::to_string(2 * kMaxRopeHalf) +
                         " and at most the row width " + std::to_string(norm.dim));
  }
  if (norm.q != nullptr)
    return Unimplemented("rms_norm + rope: quantized rows (LaunchRmsNorm only)");
  if (kv_fp8_block < 0 || kv_fp8_block % 32 != 0 || kv_fp8_block > 256) {
    return Unimplemented("rms_norm + rope: kv_fp8_block " + std::to_string(kv_fp8_block) +
                         " must be a multiple of 32, at most 256");
  }
  if (kv_packed != nullptr &&
      (kv_fp8_block == 0 || (norm.dim - rope_dim) % kv_fp8_block != 0 ||
       (norm.dim - rope_dim) % 8 != 0 ||
       kv_packed_ld < qc::PackedRow{qc::Kind::kFp8Pow2, static_cast<int>(norm.dim - rope_dim),
                                    kv_fp8_block, rope_dim}
                          .floats())) {
    return InvalidArgument(
        "rms_norm + rope: packed rows need kv_fp8_block dividing dim - rope_dim "
        "(a multiple of 8) and kv_packed_ld of a whole packed row");
  }
  return Status::Ok();
}

int NormThreads(int64_t dim) { return dim >= 1024 ? 512 : (dim >= 256 ? 256 : 128); }

void LaunchRmsNorm(const RmsNormParams& p, StreamHandle stream) {
  if (p.q != nullptr) {
    if (p.rows <= 0) return;
    const int threads = NormThreads(p.dim);
    DSINFER_CHECK_PARAMS(p);
    LaunchKernel(RmsNormQuantKernel, dim3(static_cast<unsigned>(p.rows)), dim3(threads), 0, stream,
                 p);
    CUDA_CHECK_LAUNCH();
    return;
  }
  RmsNormRopeParams q;
  q.norm = p;  // rope_dim 0: the norm alone
  LaunchRmsNormRope(q, stream);
}

void LaunchRmsNormRope(const RmsNormRopeParams& p, StreamHandle stream) {
  if (p.norm.rows <= 0) return;
  DSINFER_CHECK_PARAMS(p);
  LaunchKernel(RmsNormRopeKernel, dim3(static_cast<unsigned>(p.norm.rows)), dim3(NormThreads(p.norm.dim)), 0,
               stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
