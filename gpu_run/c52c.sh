#!/usr/bin/env bash
# Session 52, carry [".devcarry"]; the tree is main. c52a's persistent few-row tile was slower
# (the head 303.5 -> 556.7 us on an H200): its loads and steps found their tile and step by 64-bit
# divisions. v2 (s52_bf16_few_persistent_v2.diff) keeps cursors instead. bench_qgemm's bf16 shapes
# at 1 row and batch 1's step, main then v2; the Bf16Tc op tests.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_qgemm
bf16q main 1
bench_flash main --batches 1
apply_diff s52_bf16_few_persistent_v2.diff
gpu_build dsinfer bench_qgemm gpu_ops_test
bf16q v2 1
bench_flash v2 --batches 1
timeout 100 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
grep -E "PASSED|FAILED|Failure" -A3 "$OUT/bf16_ops_test.log" | head -12
unapply_diff s52_bf16_few_persistent_v2.diff
echo "total $(( $(date +%s) - t0 )) s"
