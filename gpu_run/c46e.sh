#!/usr/bin/env bash
# Session 46, carry [".devcarry"]. After the score tree (f9fccef), on one machine, bench_indexer:
# main; the runs kernel with its k steps at run time (s46_indexer_runtime_steps.diff: a same-machine
# check of session 45's compile-time steps, whose gain c46b and c46c's baselines disagreed on);
# 8 rows a block (s46_indexer_run8.diff); three blocks an SM (s46_indexer_3blocks.diff: 80
# registers, 8 bytes spilled; the tree freed the head-terms buffer, 73 KB of shared memory a
# block); the B operands by ldmatrix .x4 on the tree (s46_indexer_ldmatrix2/3.diff: the runs
# kernel held to 2 blocks an SM, 128 registers, 32 bytes spilled, or 3, 80 registers, 16 bytes;
# without a bound it takes 154). Then ncu of main's runs kernel. Each variant alone on main.
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer
idx main
for d in runtime_steps run8 3blocks ldmatrix2 ldmatrix3; do
  apply_diff s46_indexer_$d.diff
  gpu_build bench_indexer gpu_v41_ops_test
  timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops_$d.log" 2>&1; echo "gpu_v41_ops_test $d rc=$?"; grep -E "FAILED|Failure" -A3 "$OUT/indexer_ops_$d.log" | head -8
  idx $d
  git apply -R "gpu_run/s46_indexer_$d.diff"
done
gpu_build bench_indexer
idx main2
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc
echo "total $(( $(date +%s) - t0 )) s"
