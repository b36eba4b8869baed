// Decode GEMV instantiations for f32 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvF32(const GemvJob& job, int qn, int jb, int r, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kF32>(job, qn, jb, r, stream);
}

}  // namespace dsinfer::backend::cuda
