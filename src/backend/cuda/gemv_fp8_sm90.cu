// Decode GEMV instantiations for fp8 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvFp8(const GemvJob& job, int qn, int js, int blocks_x, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kFp8>(job, qn, js, blocks_x, stream);
}

}  // namespace dsinfer::backend::cuda
