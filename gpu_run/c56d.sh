#!/usr/bin/env bash
# Session 56 (record: the diff landed, then deleted): s56_swiglu_codes.diff (the routed experts' SwiGLU handed to W2 as act_quant codes,
# one kernel instead of SwigluKernel + MmaActQuantKernel; W3 reusing W1's x codes and gathered
# rows). Main's mode bench first (same card), then the diff: its op tests, the mode bench.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash main_mode --batches 1,32,128,256 --fp8-mma
apply_diff s56_swiglu_codes.diff
gpu_build dsinfer gpu_fp8mma_test
for m in "" "--no-fp8mma-tma-experts" "--no-fp8mma-ws-experts"; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "PASSED|FAILED|Failure" -A4 "$OUT/fp8mma_test$m.log" | head -12
done
bench_flash codes_mode --batches 1,32,128,256 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_mode.jsonl" "$OUT/bench_codes_mode.jsonl" | cut -c1-400
unapply_diff s56_swiglu_codes.diff
echo "total $(( $(date +%s) - t0 )) s"
