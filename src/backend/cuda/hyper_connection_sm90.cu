#include "backend/cuda/check.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/hyper_connection.cuh"

namespace dsinfer::backend::cuda {

namespace {

constexpr int kMaxHc = 8;

// Row softmax as the CPU reference (max-shifted; a row of -inf gives zeros).
__device__ void SoftmaxRow(float* x, int n) {
  float m = x[0];
  for (int i = 1; i < n; ++i) m = fmaxf(m, x[i]);
  if (m == -INFINITY) {
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    x[i] = expf(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

__global__ void HcPreFinishKernel(HcPreFinishParams p) {
  __shared__ float pre[kMaxHc];
  const int64_t t = blockIdx.x;
  const int hc = p.hc;
  if (threadIdx.x == 0) {
    const float* m = p.mix + t * (2 + hc) * hc;
    const float eps = p.hc_eps;
    float C[kMaxHc * kMaxHc];
    for (int i = 0; i < hc; ++i) {
      pre[i] = SigmoidF(m[i] * p.scale[0] + p.base[i]) + eps;
      p.post[t * hc + i] = 2.0f * SigmoidF(m[hc + i] * p.scale[1] + p.base[hc + i]);
    }
    for (int j = 0; j < hc * hc; ++j) C[j] = m[2 * hc + j] * p.scale[2] + p.base[2 * hc + j];
    for (int j = 0; j < hc; ++j) {
      SoftmaxRow(C + j * hc, hc);
      for (int k = 0; k < hc; ++k) C[j * hc + k] += eps;
    }
    auto normalize_columns = [&] {
      for (int k = 0; k < hc; ++k) {
        float s = 0;
        for (int j = 0; j < hc; ++j) s += C[j * hc + k];
        for (int j = 0; j < hc; ++j) C[j * hc + k] /= (s + eps);
      }
    };
    normalize_columns();
    for (int it = 0; it + 1 < p.sinkhorn_iters; ++it) {
      for (int j = 0; j < hc; ++j) {
        float s = 0;
        for (int k = 0; k < hc; ++k) s += C[j * hc + k];
        for (int k = 0; k < hc; ++k) C[j * hc + k] /= (s + eps);
      }
      normalize_columns();
    }
    for (int j = 0; j < hc * hc; ++j) p.comb[t * hc * hc + j] = C[j];
  }
  __syncthreads();
  const float* Xt = p.X + t * hc * p.D;
  for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * Xt[i * p.D + d];
    p.u[t * p.D + d] = s;
  }
}

__global__ void HcPostKernel(HcPostParams p) {
  const int64_t t = blockIdx.y;
  const int hc = p.hc;
  const float* C = p.comb + t * hc * hc;
  float* Xt = p.X + t * hc * p.D;
  for (int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; d < p.D; d += int64_t{gridDim.x} * blockDim.x) {
    float old[kMaxHc];
    for (int j = 0; j < hc; ++j) old[j] = Xt[j * p.D + d];
    const float yv = p.y[t * p.D + d];
    for (int k = 0; k < hc; ++k) {
      float s = p.post[t * hc + k] * yv;
      for (int j = 0; j < hc; ++j) s += C[j * hc + k] * old[j];
      Xt[k * p.D + d] = s;
    }
  }
}

__global__ void HcHeadFinishKernel(HcHeadFinishParams p) {
  __shared__ float pre[kMaxHc];
  const int64_t t = blockIdx.x;
  if (threadIdx.x < p.hc) {
    const int i = threadIdx.x;
    pre[i] = SigmoidF(p.mix[t * p.hc + i] * p.scale[0] + p.base[i]) + p.hc_eps;
  }
  __syncthreads();
  const float* Xt = p.X + t * p.hc * p.D;
  for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) {
    float s = 0;
    for (int i = 0; i < p.hc; ++i) s += pre[i] * Xt[i * p.D + d];
    p.out[t * p.D + d] = s;
  }
}

__global__ void EmbedKernel(EmbedParams p) {
  const int64_t t = blockIdx.x;
  const int64_t id = p.ids[t];
  float* X = p.X + t * p.hc * p.D;
  for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x) {
    float v;
    if (p.table_bf16) {
      v = __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(p.table)[id * p.D + d]) << 16);
    } else {
      v = static_cast<const float*>(p.table)[id * p.D + d];
    }
    for (int i = 0; i < p.hc; ++i) X[i * p.D + d] = v;
  }
}

__global__ void GatherRowsKernel(const float* src, const int32_t* rows, int64_t width, float* dst) {
  const int64_t i = blockIdx.x;
  const float* s = src + static_cast<int64_t>(rows[i]) * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) dst[i * width + c] = s[c];
}

}  // namespace

void LaunchHcPreFinish(const HcPreFinishParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  if (p.hc > kMaxHc) std::abort();
  HcPreFinishKernel<<<static_cast<unsigned>(p.n), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void LaunchHcPost(const HcPostParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>((p.D + 255) / 256, 16));
  HcPostKernel<<<dim3(bx, static_cast<unsigned>(p.n)), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void LaunchHcHeadFinish(const HcHeadFinishParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  HcHeadFinishKernel<<<static_cast<unsigned>(p.n), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void LaunchEmbed(const EmbedParams& p, StreamHandle stream) {
  if (p.n <= 0) return;
  EmbedKernel<<<static_cast<unsigned>(p.n), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void LaunchGatherRows(const float* src, const int32_t* rows, int64_t n, int64_t width, float* dst,
                      StreamHandle stream) {
  if (n <= 0) return;
  GatherRowsKernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(src, rows, width, dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
