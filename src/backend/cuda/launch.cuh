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
//     this one has passed it (or exited). Our kernels trigger first thing (the mHC finish, where
//     the next kernels' early weight loads slowed the kernel before it, later): the next kernel's
//     blocks then sit resident (loading their weights, then waiting) while this one runs. That
//     cannot starve anything: a kernel is launched only once every block of the one before it is
//     resident, so the kernels it waits for always run to completion.
// Under stream capture the same launches become programmatic edges of the CUDA graph. Each launch
// also sets its kernel's shared-memory carveout preference (AutoCarveout, runtime.h).
// KernelOptions::pdl false (runtime.h) launches everything with plain stream order (A/B timing).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/check.cuh"
#include "backend/cuda/runtime.h"

namespace dsinfer::backend::cuda {

__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void PdlTrigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// cluster_x > 1: blocks [c * cluster_x, (c + 1) * cluster_x) of grid x form a thread-block cluster
// (grid.x must be a multiple of it).
template <typename... KArgs, typename... Args>
void LaunchKernelClustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                           cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  AutoCarveout(reinterpret_cast<const void*>(kernel), block.x * block.y * block.z, smem);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (GetKernelOptions().pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KArgs, typename... Args>
void LaunchKernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  Args&&... args) {
  LaunchKernelClustered(kernel, grid, block, smem, stream, 1u, std::forward<Args>(args)...);
}

}  // namespace dsinfer::backend::cuda
