#!/usr/bin/env bash
# Session 47, carry [".devcarry"]. The routed FP4 experts' warp-specialized tile at up to 192
# tokens (s47_experts_n192.diff: an expert of ~192 pairs is one tile, its weights converted once
# instead of for a 128 and a 64 tile; the slice totals in shared memory, 3 stages). The tree holds
# the change: its bit tests (gpu_fp8mma_test on both expert kernels, the new 400-pair and 3-slice
# cases), bench_fp8_gemm's expert shapes, the mode's 8,192-token prefill; then the diff reversed
# (main) and the same figures. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm dsinfer gpu_fp8mma_test
fp8mma_tests
for s in expert_w1 expert_w2; do gemm n192_$s --only $s; done
bench_flash n192 --batches 1 --fp8-mma
git apply -R gpu_run/s47_experts_n192.diff || { echo "reverse failed"; exit 1; }
gpu_build bench_fp8_gemm dsinfer
for s in expert_w1 expert_w2; do gemm main_$s --only $s; done
bench_flash main --batches 1 --fp8-mma
git apply gpu_run/s47_experts_n192.diff
echo "total $(( $(date +%s) - t0 )) s"
