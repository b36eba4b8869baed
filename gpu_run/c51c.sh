#!/usr/bin/env bash
# Session 51, third call (warm, carry [".devcarry"]), as run inline: the GPU suite and the goldens
# with s51_combine_chunk_batch.diff applied (landed after it passed, 125 of 125; the goldens'
# printed lines are GCC 13's known V4.1 config E miss, perf.md "Session 40").
source "$(dirname "$0")/common.sh"
apply_diff s51_combine_chunk_batch.diff
gpu_build
gpu_suite 300
goldens
unapply_diff s51_combine_chunk_batch.diff
echo "total $(( $(date +%s) - t0 )) s"
