#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/norm.cuh"

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
  auto norm = [&](int64_t i) {
    const float v = x[i] * scale;
    return p.weight ? p.weight[i] * v : v;
  };
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
  LaunchKernel(RmsNormRopeKernel, dim3(static_cast<unsigned>(p.norm.rows)), dim3(NormThreads(p.norm.dim)), 0,
               stream, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
