#!/usr/bin/env bash
# Session 56 (record: the diff landed, then deleted): s56_shared_codes.diff, the shared expert's SwiGLU handed to its W2 as codes
# (LinearParams::swiglu_to_aq; W3 on W1's codes). Main's mode prefill first (same card), then the
# diff: the mode's op tests, the model in the mode against the CPU, the mode's prefill.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash main_mode --batches 1 --fp8-mma
apply_diff s56_shared_codes.diff
gpu_build dsinfer gpu_fp8mma_test gpu_model_test
timeout 90 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test.log" 2>&1; echo "gpu_fp8mma_test rc=$?"
grep -hE "PASSED|FAILED|Failure" -A4 "$OUT/fp8mma_test.log" | head -12
timeout 120 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8Mma*' > "$OUT/model_test.log" 2>&1; echo "gpu_model_test rc=$?"
grep -hE "PASSED|FAILED" "$OUT/model_test.log" | head -3
bench_flash shared_codes_mode --batches 1 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_mode.jsonl" "$OUT/bench_shared_codes_mode.jsonl" | cut -c1-420
unapply_diff s56_shared_codes.diff
echo "total $(( $(date +%s) - t0 )) s"
