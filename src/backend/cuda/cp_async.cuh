// Asynchronous global -> shared copies (cp.async, sm_80+), internal to backend/cuda: the tiled
// kernels' pipelines (qgemm_sm90.cu, qgemm_wg_sm90.cu, bf16_tc_linear_sm90.cu). A copy with ok
// false fills its bytes with zeros and reads nothing (src-size 0), so gmem must only be some valid
// address.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// A shared-memory pointer as the 32-bit address PTX takes.
__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Dynamic shared memory `p` rounded up to a 1024-byte boundary of the shared window (the 128-byte
// swizzle's atoms), by pointer arithmetic: what derives from it stays known as shared memory, so
// its loads compile to ld.shared (an integer round trip made them generic loads, on the long
// scoreboard).
template <typename T>
__device__ __forceinline__ T* AlignSmem1024(T* p) {
  return p + ((1024u - (SmemAddr(p) & 1023u)) & 1023u);
}

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool ok) {
  const uint32_t s = SmemAddr(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool ok) {
  const uint32_t s = SmemAddr(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void CpAsync8(void* smem, const void* gmem, bool ok) {
  const uint32_t s = SmemAddr(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem),
               "r"(ok ? 8 : 0));
}
// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A block's cp.async pipeline of kStages shared-memory stages over nsteps steps, load(stage,
// step) issuing one step's copies into a stage (the tiled kernels' pipelines). Fill: the first
// kStages - 1 steps, one commit group each (empty past the last step).
template <int kStages, typename Load>
__device__ __forceinline__ void PipelineFill(int64_t nsteps, Load&& load) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) load(s, s);
    CpAsyncCommit();
  }
}
// Before step ks computes: waits until its stage is in and every thread is done with step
// ks - 1's, then refills that stage with step ks + kStages - 1. Returns step ks's stage.
template <int kStages, typename Load>
__device__ __forceinline__ int PipelineAdvance(int64_t ks, int64_t nsteps, Load&& load) {
  CpAsyncWait<kStages - 2>();
  __syncthreads();
  if (ks + kStages - 1 < nsteps)
    load(static_cast<int>((ks + kStages - 1) % kStages), ks + kStages - 1);
  CpAsyncCommit();
  return static_cast<int>(ks % kStages);
}

// Shared-memory barriers (mbarrier, sm_80+) for pipelines whose stages are filled and released
// without a block-wide barrier: a phase completes after `count` arrivals; a waiter names the
// parity of the phase it waits for (0 for the first completion, then 1, 0, ...).
__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}
// One arrival once every cp.async this thread issued so far has landed (the arrival is counted
// in the barrier's init count: noinc).
__device__ __forceinline__ void CpAsyncMbarArrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(SmemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nMBAR_WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra MBAR_WAIT_%=;\n}\n" ::"r"(SmemAddr(bar)),
      "r"(parity)
      : "memory");
}
// A ring of kStages stages, stage s filled when full[s] completes and free again when empty[s]
// does: the producer's fill f and a consumer's use u both take stage f % kStages (u % kStages).
// Fill f waits for the release of the stage's previous use (none for the first kStages fills);
// use u waits for its fill.
template <int kStages>
__device__ __forceinline__ void RingWaitEmpty(uint64_t* empty, uint32_t fill) {
  if (fill >= kStages) MbarWait(empty + fill % kStages, (fill / kStages - 1) & 1);
}
template <int kStages>
__device__ __forceinline__ void RingWaitFull(uint64_t* full, uint32_t use) {
  MbarWait(full + use % kStages, (use / kStages) & 1);
}

}  // namespace dsinfer::backend::cuda
