#!/usr/bin/env bash
# Session 55 (not run: the device time ran out; gpu_run/c56a.sh runs the same and more). Carry
# [".devcarry"]; the tree is main. s55_experts_tma2.diff: the warp-specialized
# experts' tile with only the tokens fed by the TMA (one box of the gathered rows and one bulk copy
# of their scales a stage, from thread 0), the weights still by the producer warpgroup's cp.async
# (c55a's form, every weight row a bulk copy by one warp, was 3.4x slower: the consumers waited on
# full stages). Its bits, bench_fp8_gemm against main's tile, the mode's prefill both ways if
# time is left.
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-400} - ($(date +%s) - t0) )); }
apply_diff s55_experts_tma2.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test
timeout 90 build-cuda/bin/gpu_fp8mma_test --fp8mma-tma-experts > "$OUT/fp8mma_test_tma.log" 2>&1; echo "gpu_fp8mma_test --fp8mma-tma-experts rc=$?"
grep -hE "PASSED|FAILED|Failure" -A3 "$OUT/fp8mma_test_tma.log" | head -10
for f in "" "--tma-experts"; do
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm_${f:2:3}_$s.jsonl" 2>&1
    echo "gemm $f $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_${f:2:3}_$s.jsonl" | tr '\n' ' ')"
  done
done
if [ "$(left)" -gt 150 ]; then  # (LIMIT: the call's seconds)
  gpu_build dsinfer
  bench_flash mma_main --batches 1 --fp8-mma
  bench_flash mma_tma2 --batches 1 --fp8-mma --fp8mma-tma-experts
fi
unapply_diff s55_experts_tma2.diff
echo "total $(( $(date +%s) - t0 )) s"
