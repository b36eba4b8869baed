#!/usr/bin/env bash
# Session 50, carry [".devcarry"]; the tree is main with s50_fused_swiglu_quant.diff applied (the
# routed SwiGLU pair's W3 epilogue writing w2's act_quant codes in the FP8-instruction mode):
# the op tests (both expert kernels; the new ExpertsSwigluQuantMatchesUnfused among them), the
# mode's 8,192-token prefill and batch 1, then the GPU suite. c50d times main on the same machine.
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
grep -hE "ExpertsSwigluQuant|ExpertsMatch" "$OUT"/fp8mma_test*.log | grep -E "OK|FAILED" | head -4
bench_flash fused --batches 1 --fp8-mma
gpu_suite 280
echo "total $(( $(date +%s) - t0 )) s"
