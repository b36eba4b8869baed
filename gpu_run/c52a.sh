#!/usr/bin/env bash
# Session 52, carry [".devcarry"]; the tree is main. (1) Batch 1's critical path after session
# 51's combine change: a cupti timeline of graph-replayed steps and its chain. (2) The bf16
# few-row tile persistent (s52_bf16_few_persistent.diff: at most one block an SM, each walking
# its row tiles with one ring of stages, so an SM's weight stream does not drain and refill
# between tiles; the same chains, the same bits): bench_qgemm's bf16 shapes at 1 row, the Bf16Tc
# op tests (every tile bit for bit) and batch 1's step, against main in the same call; then the
# GPU suite with it in the time left.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_qgemm
bf16q main 1
bench_flash main --batches 1
timeline 1
apply_diff s52_bf16_few_persistent.diff
gpu_build dsinfer bench_qgemm gpu_ops_test
timeout 200 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
grep -E "PASSED|FAILED|Failure" -A3 "$OUT/bf16_ops_test.log" | head -12
bf16q pers 1
bench_flash pers --batches 1
gpu_build
gpu_suite $(( 570 - ($(date +%s) - t0) ))
unapply_diff s52_bf16_few_persistent.diff
echo "total $(( $(date +%s) - t0 )) s"
