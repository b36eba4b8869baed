#!/usr/bin/env bash
# Session 50, carry [".devcarry"]; the tree is main with s50_fused_swiglu_quant.diff applied, now
# with the SwiGLU epilogue in a kernel of its own (MmaWsExpertKernel<kFp4, kSq>; the epilogue
# noinline): c50c / c50d measured the first form 7.8 ms slower on the mode's prefill (the routed
# experts 70.6 -> 78.4 ms), its epilogue inlined into the one kernel that w1, w3 and w2 share.
# The op tests, the mode's prefill, main's for reference (diff reversed), the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer gpu_fp8mma_test
fp8mma_tests
grep -hE "ExpertsSwigluQuant" "$OUT"/fp8mma_test*.log | grep -E "OK|FAILED" | head -2
bench_flash sq --batches 1 --fp8-mma
unapply_diff s50_fused_swiglu_quant.diff
gpu_build dsinfer
bench_flash main --batches 1 --fp8-mma
apply_diff s50_fused_swiglu_quant.diff
gpu_build
gpu_suite 200
echo "total $(( $(date +%s) - t0 )) s"
