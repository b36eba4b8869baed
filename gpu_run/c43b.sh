#!/usr/bin/env bash
# Prepared in session 42 (not run), carry [".devcarry"]. Where the mode's prefill goes after the
# experts: ncu (full set, source-level stalls) of one launch each of the row attention (39.8 ms of
# the H100's 193), the indexer's tensor-core scoring and its top-k (8.7 ms), in flash-l8's
# 8,192-token prefill. (The mHC kernels were profiled in session 39,
# bench/results/gpu_h100_2026-12-05_s39_ncu_hc.txt: the post 1.73x its bytes' time with DRAM 66%
# and issue 63% busy, the finish 2.1x.)
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
for k in SparseAttentionTcRowKernel IndexerScoreTcKernel IndexerTopKKernel; do
  ncu_kernel $k 3 build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1 --steps 1 --prefill 8192 --kv-cache-dtype fp8 --fp8-mma
done
echo "total $(( $(date +%s) - t0 )) s"
