#!/usr/bin/env bash
# Prepared in session 50 (compiled, not run), carry [".devcarry"]; the tree is main. The routed
# FP4 SwiGLU pair's W3 ending in the SwiGLU and w2's act_quant, third form
# (s50_fused_swiglu_quant_v3.diff): MmaWsExpertKernel<true, true>, whose producer copies the tile's
# W1 outputs (64 KB) and pair ids into shared memory once the tile's first stages are in the ring,
# so the epilogue no longer waits on DRAM (c50f: the first forms' epilogue waited on its gate
# loads, 4.73 against 2.57 ms). The op tests (ExpertsSwigluQuantMatchesUnfused among them), the
# mode's prefill with the diff and without it (reversed), then the GPU suite with it.
source "$(dirname "$0")/common.sh"
apply_diff s50_fused_swiglu_quant_v3.diff
gpu_build
fp8mma_tests
grep -hE "ExpertsSwigluQuant" "$OUT"/fp8mma_test*.log | grep -E "OK|FAILED" | head -2
bench_flash v3 --batches 1 --fp8-mma
unapply_diff s50_fused_swiglu_quant_v3.diff
gpu_build dsinfer
bench_flash main --batches 1 --fp8-mma
apply_diff s50_fused_swiglu_quant_v3.diff
gpu_build
gpu_suite 200
unapply_diff s50_fused_swiglu_quant_v3.diff
echo "total $(( $(date +%s) - t0 )) s"
