#!/usr/bin/env bash
# Session 51, carry [".devcarry"]; the tree is main. Session 50's c50g.sh (deleted) run once: its
# prepared s50_fused_swiglu_quant_v3.diff (the routed FP4 SwiGLU pair's W3 ending in the SwiGLU
# and w2's act_quant, its gate rows copied into shared memory by the producer during the k loop):
# the op tests, the mode's prefill with the diff and without it; the GPU suite with it only where
# it gained (saves the suite's 3 device minutes otherwise).
source "$(dirname "$0")/common.sh"
apply_diff s50_fused_swiglu_quant_v3.diff
gpu_build
fp8mma_tests
grep -hE "ExpertsSwigluQuant" "$OUT"/fp8mma_test*.log | grep -E "OK|FAILED" | head -2
bench_flash v3 --batches 1 --fp8-mma
unapply_diff s50_fused_swiglu_quant_v3.diff
gpu_build dsinfer
bench_flash main --batches 1 --fp8-mma
sec() { grep -o '"bench": "prefill", "tokens": 8192, "chunk": [0-9]*, "seconds": [0-9.]*' "$OUT/bench_$1.jsonl" | grep -o '[0-9.]*$'; }
if awk -v a="$(sec v3)" -v b="$(sec main)" 'BEGIN { exit !(a != "" && b != "" && a < b - 0.001) }'; then
  apply_diff s50_fused_swiglu_quant_v3.diff
  gpu_build
  bench_flash v3b --batches 1 --fp8-mma
  gpu_suite 200
  unapply_diff s50_fused_swiglu_quant_v3.diff
else
  echo "no gain: the suite not run"
fi
echo "total $(( $(date +%s) - t0 )) s"
