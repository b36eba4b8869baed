#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/norm.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMaxRopeHalf = 128;

// One block per token: the (cos, sin) of each frequency once (every head shares them; the double
// sincos is the expensive part), then every head's pairs.
__global__ void RopeKernel(RopeParams p) {
  PdlTrigger();
  PdlWait();
  __shared__ float cs[kMaxRopeHalf][2];
  const int64_t t = blockIdx.x;
  const int half = p.rope_dim / 2;
  const int pos = p.pos[t];
  for (int j = threadIdx.x; j < half; j += blockDim.x) RopeCosSin(pos, p.inv_freq[j], &cs[j][0], &cs[j][1]);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < p.heads * half; i += blockDim.x) {
    const int64_t h = i / half, j = i % half;
    float* v = p.x + t * p.token_stride + h * p.head_stride + (p.dim - p.rope_dim) + 2 * j;
    RotateWith(v[0], v[1], cs[j][0], cs[j][1], p.inverse);
  }
}

// RMSNorm of one row per block (block-wide fixed-order sum of squares), then, when rope_dim > 0,
// the row's trailing rope pairs rotated from the normalized values in registers (RopeKernel's
// cos/sin and rotation); rows are (token, head). LaunchRmsNorm is the rope_dim = 0 case.
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

__global__ void ScaleKernel(float* x, int64_t n, float s) {
  PdlTrigger();
  PdlWait();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) x[i] *= s;
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

void LaunchRope(const RopeParams& p, StreamHandle stream) {
  if (p.tokens <= 0 || p.rope_dim <= 0) return;
  if (p.rope_dim / 2 > kMaxRopeHalf) std::abort();
  LaunchKernel(RopeKernel, dim3(static_cast<unsigned>(p.tokens)), dim3(256), 0, stream, p);
  CUDA_CHECK_LAUNCH();
}

void LaunchScale(float* x, int64_t n, float s, StreamHandle stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 1024);
  LaunchKernel(ScaleKernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, x, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
