// main() of the GPU test binaries: gtest's flags, then the kernel-variant choices the variant runs
// of tests/gpu/CMakeLists.txt set (backend/cuda/runtime.h KernelOptions; every choice must give
// the same bits): --no-gemv (no decode GEMV), --qlinear-warps=N (warps per FP8/FP4 block),
// --qgemm-min-rows=N (the tiled GEMM for N dense rows and more; default 128),
// --qgemm-expert-min-rows=N (the tiled GEMM for routed experts from N rows per expert; default 32),
// --qgemm-mma=wgmma|sync (the tiled GEMM's instruction; default wgmma; the same bits),
// --ws-scales-t=0|1 (the warp-specialized GEMM's act_quant scales transposed or not; the same
// bits),
// --qexpert-rows-min-slots=N (routed FP4 experts' row-tile kernel from N expert slots; 0: off),
// --attention-heads-per-block=N (sparse attention heads per block, 1/2/4; default by rows),
// --attention-tc (sparse attention on the tensor cores: other bits than the CUDA-core kernel, but
// batch-invariant, so the tests' prefill = decode checks hold with it as well),
// --no-fp8mma-ws-experts (the FP8-instruction mode's experts at many rows on the gather tile
// instead of the warp-specialized one; the same bits).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/runtime.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  dsinfer::backend::cuda::KernelOptions k;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-fp8mma-ws-experts") {
      k.fp8mma_ws_experts = false;
    } else if (a == "--no-fp8mma-tma-experts") {
      k.fp8mma_tma_experts = false;
    } else if (a == "--no-fp8mma-wide-experts") {
      k.fp8mma_wide_experts = false;
    } else if (a == "--no-gemv") {
      k.gemv_f32 = k.gemv_bf16 = false;
    } else if (a.rfind("--qgemm-min-rows=", 0) == 0) {
      k.qgemm_min_rows = std::atoll(a.c_str() + 17);
    } else if (a.rfind("--qgemm-expert-min-rows=", 0) == 0) {
      k.qgemm_expert_min_rows = std::atoll(a.c_str() + 24);
    } else if (a.rfind("--qexpert-rows-min-slots=", 0) == 0) {
      k.qexpert_rows_min_slots = std::atoi(a.c_str() + 25);
    } else if (a.rfind("--attention-tc-row-min-rows=", 0) == 0) {
      k.attention_tc_row_min_rows = std::atoll(a.c_str() + 28);
    } else if (a.rfind("--attention-heads-per-block=", 0) == 0) {
      k.attention_heads_per_block = std::atoi(a.c_str() + 28);
    } else if (a == "--ws-scales-t=0" || a == "--ws-scales-t=1") {
      k.qgemm_ws_scales_t = a.back() == '1';
    } else if (a == "--qgemm-mma=wgmma" || a == "--qgemm-mma=sync") {
      k.qgemm_wgmma = a == "--qgemm-mma=wgmma";
    } else if (a.rfind("--indexer-tc-min-rows=", 0) == 0) {
      k.indexer_tc_min_rows = std::atoll(a.c_str() + 22);
    } else if (a == "--attention-row-pv=sync") {
      k.attention_row_pv_wgmma = false;
    } else if (a == "--attention-row-prepass") {
      k.attention_row_prepass = true;
    } else if (a == "--attention-tc") {
      k.attention_tc = dsinfer::backend::cuda::KernelOptions::AttentionTc::kOn;
    } else if (a.rfind("--qlinear-warps=", 0) == 0) {
      k.qlinear_warps = std::atoi(a.c_str() + 16);
      if (k.qlinear_warps < 1 || k.qlinear_warps > 16) {
        std::fprintf(stderr, "--qlinear-warps must be 1..16\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  dsinfer::backend::cuda::SetKernelOptions(k);
  return RUN_ALL_TESTS();
}
