// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel may be started while
// the kernel before it on the stream is still running, so that its launch latency and its
// weight loads (which depend on nothing earlier) overlap the tail of the previous kernel.
//
// The contract every kernel launched through LaunchKernel keeps:
//   * PdlWait() runs in every thread before the kernel reads anything an earlier kernel wrote and
//     before it writes anything (griddepcontrol.wait returns once every earlier kernel in the
//     stream has completed and its memory is visible). Only reads of constant data (weights,
//     tables written at load time) may come before it.
//   * Every block reaches PdlWait() (no early return before it): a kernel's completion must imply
//     the completion of the kernels before it, or a later kernel's wait would not cover them.
//   * PdlTrigger() may come anywhere; it lets the next kernel be scheduled once every block of
//     this one has passed it (or exited). Our kernels trigger first thing: the next kernel's
//     blocks then sit resident (loading their weights, then waiting) while this one runs. That
//     cannot starve anything: a kernel is launched only once every block of the one before it is
//     resident, so the kernels it waits for always run to completion.
// Under stream capture the same launches become programmatic edges of the CUDA graph.
// DSINFER_PDL=0 in the environment launches everything with plain stream order (for A/B timing).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/check.cuh"

namespace dsinfer::backend::cuda {

__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void PdlTrigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

inline bool PdlEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("DSINFER_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

template <typename... KArgs, typename... Args>
void LaunchKernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = PdlEnabled() ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace dsinfer::backend::cuda
