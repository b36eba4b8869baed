#!/usr/bin/env bash
# Prepared in session 57 for the next session's first call (about 7 minutes; ask for an H200
# first: the goals' card, whose figures are still session 52's). Main's figures: flash-l8 with
# the FP8 cache by default and in the mode, decode batches 1 / 32 / 128 / 256 and the 8,192-token
# prefill; then s58_long_k_test.diff (ExpertsMatchCpuBitForBit at k = 2,048 for T = 150, so that
# the experts' rings wrap within a tile in ctest too; the bench's mismatch count covers k = 4,096
# already) on both expert kernels, and the GPU suite with it. Land the test if it passes.
source "$(dirname "$0")/common.sh"
gpu_build
bench_flash main_default --batches 1,32,128,256
bench_flash main_mode --batches 1,32,128,256 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_default.jsonl" "$OUT/bench_main_mode.jsonl" | cut -c1-420
apply_diff s58_long_k_test.diff
gpu_build gpu_fp8mma_test
fp8mma_tests
gpu_suite 240
unapply_diff s58_long_k_test.diff
echo "total $(( $(date +%s) - t0 )) s"
