// Asynchronous global -> shared copies (cp.async, sm_80+), internal to backend/cuda: the tiled
// kernels' pipelines (qgemm_sm90.cu, bf16_tc_linear_sm90.cu). A copy with ok false fills its
// bytes with zeros and reads nothing (src-size 0), so gmem must only be some valid address.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool ok) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool ok) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 4 : 0));
}
// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace dsinfer::backend::cuda
