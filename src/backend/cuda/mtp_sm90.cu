#include "backend/cuda/check.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mtp.cuh"

namespace dsinfer::backend::cuda {

namespace {

// One block per row; blockIdx.y splits the row into slices of kSlice floats.
constexpr int kSlice = 4096;

__device__ __forceinline__ void CopySlice(const float* s, float* d, int64_t width) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kSlice;
  const int64_t c1 = min(width, c0 + kSlice);
  if (width % 4 == 0) {
    for (int64_t c = c0 + 4 * threadIdx.x; c < c1; c += 4 * blockDim.x)
      *reinterpret_cast<float4*>(d + c) = *reinterpret_cast<const float4*>(s + c);
  } else {
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) d[c] = s[c];
  }
}

__global__ void MtpGatherKernel(MtpGatherParams p) {
  PdlTrigger();
  PdlWait();
  const int64_t i = blockIdx.x;
  const int64_t width = p.ring.width;
  const int32_t r = p.src[i];
  const float* s =
      r >= 0 ? p.x + static_cast<int64_t>(r) * width : p.ring.Row(p.meta.slot[i], p.meta.pos[i]);
  CopySlice(s, p.out + i * width, width);
}

__global__ void AddToStreamsKernel(float* x, const float* add, int hc, int64_t D) {
  PdlTrigger();
  PdlWait();
  const int64_t t = blockIdx.x;
  const float* a = add + t * D;
  float* row = x + t * hc * D;
  for (int64_t c = threadIdx.x; c < hc * D; c += blockDim.x) row[c] += a[c % D];
}

}  // namespace

void LaunchMtpGatherStreams(const MtpGatherParams& p, StreamHandle stream) {
  if (p.meta.n <= 0) return;
  const auto slices = static_cast<unsigned>((p.ring.width + kSlice - 1) / kSlice);
  LaunchKernel(MtpGatherKernel, dim3(static_cast<unsigned>(p.meta.n), slices), dim3(256), 0, stream,
               p);
  CUDA_CHECK_LAUNCH();
}

void LaunchAddToStreams(float* x, const float* add, int64_t n, int hc, int64_t D,
                        StreamHandle stream) {
  if (n <= 0) return;
  LaunchKernel(AddToStreamsKernel, dim3(static_cast<unsigned>(n)), dim3(256), 0, stream, x, add, hc,
               D);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
