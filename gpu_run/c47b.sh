#!/usr/bin/env bash
# Prepared in session 46 (compiled here, not run), carry [".devcarry"]. The indexer's scores on
# warpgroup MMA (s46_indexer_wgmma.diff): a warpgroup's 64 heads x its 32 entries a k16 step as
# one m64n32k16 wgmma, A the same register fragments, B the pass's keys decoded into the 128-byte
# swizzle (no padding; 16 KB a pass) instead of 64 shared loads and 32 mma.sync a thread and pass;
# each 32-column block two steps from zero (wgmma rounds each k16 step as mma.sync: wgmma.cuh), the
# blocks added in order, two accumulator sets so that the next block's wgmma runs while one is
# added: the same bits by construction. The runs kernel then takes 108 registers (2 blocks an SM;
# s46_indexer_wgmma3.diff holds it to 3 blocks: 80 registers, 108 bytes spilled, and ptxas
# serializes the wgmma); the one-row kernels 103 / 90 registers (were 64). Each on main: the
# indexer's bit tests (with the all-pairs decode test), bench_indexer (decode rows and the
# 8,192-token prefill), the mode's 128K prefill. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer
idx main
p128 main
for d in wgmma wgmma3; do
  apply_diff s46_indexer_$d.diff
  gpu_build bench_indexer dsinfer gpu_v41_ops_test
  timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops_$d.log" 2>&1; echo "gpu_v41_ops_test $d rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops_$d.log" | head -10
  idx $d
  p128 $d
  git apply -R "gpu_run/s46_indexer_$d.diff"
done
echo "total $(( $(date +%s) - t0 )) s"
