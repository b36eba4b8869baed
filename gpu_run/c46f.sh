#!/usr/bin/env bash
# Session 46, carry [".devcarry"]. c46e on one H100: 8 rows a block 1452.5 -> 1238.6 us, 3 blocks
# an SM -> 1194.0 (each alone). Both (s46_indexer_run8_3b.diff) and 16 rows with 3 blocks
# (s46_indexer_run16_3b.diff), each on main with the indexer's bit tests; main's and each one's
# 32K prefill.
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer
idx main
long32k main
for d in run8_3b run16_3b; do
  apply_diff s46_indexer_$d.diff
  gpu_build bench_indexer dsinfer gpu_v41_ops_test
  timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops_$d.log" 2>&1; echo "gpu_v41_ops_test $d rc=$?"; grep -E "FAILED|Failure" -A3 "$OUT/indexer_ops_$d.log" | head -8
  idx $d
  long32k $d
  git apply -R "gpu_run/s46_indexer_$d.diff"
done
echo "total $(( $(date +%s) - t0 )) s"
