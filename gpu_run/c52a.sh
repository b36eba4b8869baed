#!/usr/bin/env bash
# Prepared in session 51 (not run), carry [".devcarry"]; the tree is main. Batch 1's critical
# path after the combine change: a cupti kernel timeline of graph-replayed steps (the last one is
# session 39's, at 1.894 ms), its chain (end order, what each kernel adds) and its exposed time per
# kernel; then the step as `dsinfer bench` times it. Session 51's ncu found the routed experts'
# GEMVs waiting on their routing chain; the timeline says how much of them is exposed now.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
timeline 1
bench_flash b1 --batches 1
echo "total $(( $(date +%s) - t0 )) s"
