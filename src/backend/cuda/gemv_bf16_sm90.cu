// Decode GEMV instantiations for bf16 weights (gemv_impl.cuh).
#include "backend/cuda/gemv_impl.cuh"

namespace dsinfer::backend::cuda {

bool TryLaunchGemvBf16(const GemvJob& job, int qn, int jb, int r, StreamHandle stream) {
  return gemv::Dispatch<WeightFormat::kBf16>(job, qn, jb, r, stream);
}

}  // namespace dsinfer::backend::cuda
