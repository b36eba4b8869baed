#!/usr/bin/env bash
# Session 50, carry [".devcarry"], after c50c on the same machine: main (the diff reversed) timed
# as c50c timed the fused form, then the fused form again (the order's drift).
source "$(dirname "$0")/common.sh"
git apply -R gpu_run/s50_fused_swiglu_quant.diff || { echo "reverse failed"; exit 1; }
grep '^+++ b/' gpu_run/s50_fused_swiglu_quant.diff | cut -c7- >> build-cuda/.diff_files
gpu_build dsinfer
bench_flash main --batches 1 --fp8-mma
git apply gpu_run/s50_fused_swiglu_quant.diff
touch $(grep '^+++ b/' gpu_run/s50_fused_swiglu_quant.diff | cut -c7-)
gpu_build dsinfer
bench_flash fused2 --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"
