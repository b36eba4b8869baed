#include <cstdint>
#include <cstdio>

#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/norm.cuh"
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
    for (int j = threadIdx.x; j < half; j += blockDim.x) RopeCosSin(pos, q.inv_freq[j], &cs[j][0], &cs[j][1]);
  }
  const float* x = p.x + r * p.ldx;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
  ss = BlockSum(ss, scratch);  // its barriers also publish cs
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(p.dim) + p.eps);
  float* y = p.y + r * p.ldy;
  auto norm4 = [&](float xi, int64_t i) {  // x[i] = xi
    const float v = xi * scale;
    return p.weight ? p.weight[i] * v : v;
  };
  auto norm = [&](int64_t i) { return norm4(x[i], i); };
  if (p.q != nullptr) {  // act_quant of the normalized row (rope_dim 0), before y may overwrite x
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int64_t b = warp; b * qcore::kQb < p.dim; b += blockDim.x / 32) {
      const int64_t c = b * qcore::kQb + 4 * lane;
      const bool ok = c < p.dim;
      float4 v = qcore::LoadX4(x + c, ok);
      if (ok) v = make_float4(norm4(v.x, c), norm4(v.y, c + 1), norm4(v.z, c + 2), norm4(v.w, c + 3));
      float sc;
      const uint2 qv = qcore::QuantBlock(v, &sc);
      if (ok) *reinterpret_cast<uint2*>(p.q + r * p.ldq + c) = qv;
      if (lane == 0) p.s[r * p.lds + b] = sc;
    }
    __syncthreads();
  }
  const int64_t off = p.dim - q.rope_dim;
  for (int64_t i = threadIdx.x; i < off; i += blockDim.x) y[i] = norm(i);
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float a = norm(off + 2 * j), b = norm(off + 2 * j + 1);
    RotateWith(a, b, cs[j][0], cs[j][1], false);
    y[off + 2 * j] = a;
    y[off + 2 * j + 1] = b;
  }
}

}  // namespace

int NormThreads(int64_t dim) { return dim >= 1024 ? 512 : (dim >= 256 ? 256 : 128); }

void LaunchRmsNorm(const RmsNormParams& p, StreamHandle stream) {
  RmsNormRopeParams q;
  q.norm = p;  // rope_dim 0: the norm alone
  LaunchRmsNormRope(q, stream);
}

void LaunchRmsNormRope(const RmsNormRopeParams& p, StreamHandle stream) {
  if (p.norm.rows <= 0) return;
  if (p.rope_dim / 2 > kMaxRopeHalf || p.rope_dim > p.norm.dim || p.heads <= 0) std::abort();
  if (p.norm.q != nullptr &&
      (p.rope_dim != 0 || p.norm.dim % 4 != 0 || p.norm.ldx % 4 != 0 ||
       (reinterpret_cast<uintptr_t>(p.norm.x) & 15) != 0 || p.norm.ldq % 4 != 0)) {
    std::fprintf(stderr, "rms_norm: quantized rows need 16-byte aligned rows, dim %% 4 == 0, no rope\n");
    std::abort();
  }
  LaunchKernel(RmsNormRopeKernel, dim3(static_cast<unsigned>(p.norm.rows)), dim3(NormThreads(p.norm.dim)), 0,
               stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
