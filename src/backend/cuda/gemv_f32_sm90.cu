// Decode GEMV instantiations for f32 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvF32(const GemvJob& job, int qn, int js, int blocks_x, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kF32>(job, qn, js, blocks_x, stream);
}

}  // namespace dsinfer::backend::cuda
