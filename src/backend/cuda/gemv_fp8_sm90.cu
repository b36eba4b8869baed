// Decode GEMV instantiations for fp8 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvFp8(const GemvJob& job, int qn, int jb, int r, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kFp8>(job, qn, jb, r, stream);
}

}  // namespace dsinfer::backend::cuda
