#include "backend/cuda/check.cuh"
#include "backend/cuda/fake_quant.cuh"
#include "backend/cuda/launch.cuh"

namespace dsinfer::backend::cuda {

namespace {

// Thread i: block i % blocks_per_row of row i / blocks_per_row.
__global__ void FakeQuantRowsKernel(float* x, int64_t rows, int64_t ld, int64_t blocks_per_row,
                                    FakeQuant kind, int block) {
  PdlTrigger();
  PdlWait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * blocks_per_row) return;
  const int64_t r = i / blocks_per_row, b = i % blocks_per_row;
  FqBlockSerial(x + r * ld + b * block, block, kind);
}

}  // namespace

void LaunchFakeQuantRows(float* x, int64_t rows, int64_t ld, int64_t dim, FakeQuant kind, int block,
                         StreamHandle stream) {
  if (rows <= 0 || dim <= 0 || block <= 0 || dim % block != 0) return;
  const int64_t total = rows * (dim / block);
  constexpr int kThreads = 128;
  LaunchKernel(FakeQuantRowsKernel, dim3(static_cast<unsigned>((total + kThreads - 1) / kThreads)),
               dim3(kThreads), 0, stream, x, rows, ld, dim / block, kind, block);
  CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
