#!/usr/bin/env bash
# Session 45, carry [".devcarry"]. c45c's last-chunk profiles put the indexer at 57% of a 131,072-
# token prefill's last chunk (276.6 of 482.9 ms, H100, the mode): ncu of its two prefill kernels
# (bench_indexer's 8,192-token prefill; launch order: the one-row shape's 9 launches first, then
# the prefill's): the scores (IndexerScoreTcRunKernel) and the top-k (IndexerTopKKernel).
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc
ncu_kernel IndexerTopKKernel 9 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc
echo "total $(( $(date +%s) - t0 )) s"
