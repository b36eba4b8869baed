// Decode GEMV instantiations for bf16 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvBf16(const GemvJob& job, int qn, int js, int blocks_x, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kBf16>(job, qn, js, blocks_x, stream);
}

}  // namespace dsinfer::backend::cuda
