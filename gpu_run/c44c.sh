#!/usr/bin/env bash
# After c44b.sh on the same warm machine, carry [".devcarry"]: the four diffs again, the GPU
# suite, then ncu (most wanted first: the call may end before the last) of the expanded experts'
# TMA tile (bench_fp8_gemm's expert_w1: its warm-up launch's first chunk), the indexer's run
# kernel at the prefill, the expansion kernel, and the one-row indexer kernel at the prefill (the
# launch order: the one-row shape first, 9 launches each of tc and tc_rows, then the prefill's).
source "$(dirname "$0")/common.sh"
for d in s44_expand_experts s44_tma_tokens_a s43_rope_table s43_indexer_runs; do apply_diff $d.diff; done
gpu_build
gpu_suite 200
ncu_kernel MmaTmaExpertKernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
ncu_kernel MmaExpandFp4Kernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
ncu_kernel IndexerScoreTcKernel 18 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
echo "total $(( $(date +%s) - t0 )) s"
