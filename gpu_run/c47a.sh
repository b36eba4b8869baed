#!/usr/bin/env bash
# Prepared in session 46 (not run), carry [".devcarry"]. The indexer's runs kernel is latency-bound
# (c46e's ncu: no eligible warp 59% of the cycles at 2 blocks an SM; 3 blocks gained 18%). Four
# blocks an SM need 64 registers (8 bytes spill) and at most ~56 KB of shared memory a block, so
# 128 entries a block (2 passes; s46_indexer_4blocks_p2.diff), and with 32 rows a block
# (s46_indexer_4blocks_p2_r32.diff). Each on main: the indexer's bit tests, bench_indexer, the
# mode's 128K prefill (where the indexer's time is; c46j main 4.522 s, indexer 170.3 ms).
# No git stash / checkout: the device's .git is older than the tree (common.sh).
# First the new V4Fp8CacheTest.IndexKeysDecodeEveryCodeAndScaleByte (session 46, compiled, not
# run): the table decode over every (code byte, scale byte) pair of 2..252.
source "$(dirname "$0")/common.sh"
# And gpu_model_test on session 46's last change (not run then: the budget was spent): steps of
# short chunks keep the indexer's one-row kernel (IndexerTopKParams::longest_run).
gpu_build bench_indexer dsinfer gpu_v41_ops_test gpu_model_test
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8CacheTest.IndexKeysDecode*' > "$OUT/indexer_decode_test.log" 2>&1; echo "decode test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_decode_test.log" | head -12
timeout 150 build-cuda/bin/gpu_model_test > "$OUT/gpu_model_test.log" 2>&1; echo "gpu_model_test rc=$? $(( $(date +%s) - t0 )) s"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/gpu_model_test.log" | head -12
idx main
p128 main
for d in 4blocks_p2 4blocks_p2_r32; do
  apply_diff s46_indexer_$d.diff
  gpu_build bench_indexer dsinfer gpu_v41_ops_test
  timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops_$d.log" 2>&1; echo "gpu_v41_ops_test $d rc=$?"; grep -E "FAILED|Failure" -A3 "$OUT/indexer_ops_$d.log" | head -8
  idx $d
  p128 $d
  git apply -R "gpu_run/s46_indexer_$d.diff"
done
echo "total $(( $(date +%s) - t0 )) s"
