#!/usr/bin/env bash
# (Its checkouts failed or took the device's older commit: common.sh; c46j redid the A/B.)
# Session 46, carry [".devcarry"]: c46g's tree (no k-step template) against run16_3b (the template
# kept) on one machine: bench_indexer and the 32K prefill each.
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer
idx notmpl
git checkout 5fb7897 -- src/backend/cuda/indexer_topk_sm90.cu && apply_diff s46_indexer_run16_3b.diff
gpu_build bench_indexer dsinfer
idx tmpl
long32k tmpl
git checkout HEAD -- src/backend/cuda/indexer_topk_sm90.cu
gpu_build bench_indexer dsinfer
idx notmpl2
long32k notmpl
echo "total $(( $(date +%s) - t0 )) s"
