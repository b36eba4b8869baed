#!/usr/bin/env bash
# Session 52, carry [".devcarry"]; the tree is main. The bf16 few-row tile persistent
# (s52_bf16_few_persistent.diff: at most one block an SM, each walking its row tiles with one
# ring of stages, so an SM's weight stream does not drain and refill between tiles; the same
# chains, the same bits): bench_qgemm's bf16 shapes at 1 row and batch 1's step, main then the
# diff in the same call, the Bf16Tc op tests (every tile bit for bit); then, in the time left,
# batch 1's cupti timeline with the diff and the GPU suite.
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - t0) )); }
gpu_build dsinfer bench_qgemm
bf16q main 1
bench_flash main --batches 1
apply_diff s52_bf16_few_persistent.diff
gpu_build dsinfer bench_qgemm gpu_ops_test
timeout 150 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
grep -E "PASSED|FAILED|Failure" -A3 "$OUT/bf16_ops_test.log" | head -12
bf16q pers 1
bench_flash pers --batches 1
[ "$(left)" -gt 100 ] && timeline 1
[ "$(left)" -gt 200 ] && { gpu_build; gpu_suite $(( $(left) - 10 )); }
unapply_diff s52_bf16_few_persistent.diff
echo "total $(( $(date +%s) - t0 )) s"
