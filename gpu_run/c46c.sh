#!/usr/bin/env bash
# (Read its "main" as the session's starting commit: the device's .git is older, common.sh.)
# Session 46, carry [".devcarry"]. The indexer's score as a tree over the heads (the tree in
# src/backend/indexer_head_sum.h, CPU references and all three CUDA kernels): main's bench_indexer and
# 32K prefill first (the tree's change stashed), then the change: the indexer's bit tests against
# the CPU, bench_indexer, the 32K prefill, the goldens. c46d.sh runs the GPU suite after it.
source "$(dirname "$0")/common.sh"
git stash -q || { echo "stash failed"; exit 1; }
gpu_build bench_indexer dsinfer
idx main
long32k main
git stash pop -q || { echo "stash pop failed"; exit 1; }
gpu_build bench_indexer dsinfer gpu_v41_ops_test golden_test golden_v41_test
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -16
idx tree
long32k tree
goldens
echo "total $(( $(date +%s) - t0 )) s"
