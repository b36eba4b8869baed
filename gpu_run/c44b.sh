#!/usr/bin/env bash
# After c44a.sh on the same warm machine (its build-cuda kept), carry [".devcarry"]: the three
# diffs applied again (the tree comes fresh each call), the incremental build, the GPU suite, then
# ncu of the expanded experts' two kernels (bench_fp8_gemm's expert_w1: its warm-up launch's
# chunks first) and of the indexer's kernels at the prefill.
source "$(dirname "$0")/common.sh"
apply_diff s44_expand_experts.diff
apply_diff s43_rope_table.diff
apply_diff s43_indexer_runs.diff
gpu_build
gpu_suite 240
ncu_kernel MmaTmaExpertKernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
ncu_kernel MmaExpandFp4Kernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
# Launch order: the one-row shape (tc, tc_rows: 9 launches each), then the prefill (tc: the run
# kernel, tc_rows: IndexerScoreTcKernel<4>; the top-k after each).
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
ncu_kernel IndexerScoreTcKernel 18 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
echo "total $(( $(date +%s) - t0 )) s"
