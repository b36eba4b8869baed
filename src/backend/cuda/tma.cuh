// The Tensor Memory Accelerator (sm_90), internal to backend/cuda: 2D tiled tensor maps (encoded
// on the host through the driver's entry point, so nothing links libcuda), bulk tensor and bulk
// linear copies into shared memory that complete on an mbarrier's transaction count
// (qgemm_ws_sm90.cu).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "backend/cuda/cp_async.cuh"

namespace dsinfer::backend::cuda {

// Host: a row-major matrix of `outer` rows x `inner` elements of `type` (rows `row_bytes` apart,
// a multiple of 16; base 16-byte aligned), read in boxes of box_outer rows x box_inner elements
// (box_inner * element size <= 128 with the 128-byte swizzle), elements past the matrix read as
// zeros. False if the driver refuses the map (the caller takes another kernel).
bool EncodeTensorMap2d(CUtensorMap* map, CUtensorMapDataType type, const void* base, uint64_t inner,
                       uint64_t outer, uint64_t row_bytes, uint32_t box_inner, uint32_t box_outer,
                       CUtensorMapSwizzle swizzle);

// Makes mbarrier initializations visible to the asynchronous proxy (the TMA's complete_tx).
__device__ __forceinline__ void FenceMbarInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also expects `bytes` more of asynchronous copies before the phase completes.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
// The box at element coordinates (c0 inner, c1 outer) of `map` into smem (1024-byte aligned for
// the 128-byte swizzle), its bytes counted on `bar`.
__device__ __forceinline__ void TmaLoad2d(void* smem, const CUtensorMap* map, int32_t c0,
                                          int32_t c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3}], [%4];\n" ::"r"(SmemAddr(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from gmem into smem, counted on bar.
__device__ __forceinline__ void BulkLoad(void* smem, const void* gmem, uint32_t bytes,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(SmemAddr(smem)),
      "l"(gmem), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}
// A barrier of the kThreadCount threads (whole warps) that reach it with id kId (1..15; 0 is
// __syncthreads').
template <int kId, int kThreadCount>
__device__ __forceinline__ void NamedBarrier() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreadCount) : "memory");
}

// Moves the warpgroup's per-thread register budget to kRegs (a multiple of 8 in [24, 256]): a
// warp-specialized kernel's producers give registers up (kInc false), its consumers take them.
// The registers move through the block's own pool: what the increases ask must not exceed what
// the decreases release, or the increase never returns (docs/perf.md, session 31).
template <bool kInc, int kRegs>
__device__ __forceinline__ void SetMaxNReg() {
  if constexpr (kInc) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  }
}
// The register split of a warp-specialized block of kThreads threads, one block an SM: a producer
// warpgroup going to kProducer registers a thread, the other warps (the consumers) to kConsumer,
// from the launch's even share (384 threads: 168). The producer's release is checked at compile
// time to cover the consumers' raise.
template <int kThreads, int kProducer, int kConsumer>
struct WsRegs {
  static constexpr int kLaunch = 65536 / kThreads / 8 * 8;
  static_assert(128 * (kLaunch - kProducer) >= (kThreads - 128) * (kConsumer - kLaunch),
                "the consumers would take more registers than the producer gives back");
  __device__ __forceinline__ static void Producer() { SetMaxNReg<false, kProducer>(); }
  __device__ __forceinline__ static void Consumer() { SetMaxNReg<true, kConsumer>(); }
};

}  // namespace dsinfer::backend::cuda
