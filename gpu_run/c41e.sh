#!/usr/bin/env bash
# Session 41, fifth call. Carry [".devcarry"]. After c41d: the dense FP4 split case at k = 544
# (FP4 now takes FP8's 512-column slices), the mode's model check allowing two moved top-1 tokens
# of 40 (an activation-rounding flip, as the default pair's). The op tests both ways, the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
timeout 330 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout|rel err" "$OUT/ctest.log" | head -30
echo "total $(( $(date +%s) - t0 )) s"
