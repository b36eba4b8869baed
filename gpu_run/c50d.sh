#!/usr/bin/env bash
# Session 50, carry [".devcarry"], after c50c on the same machine: main (the diff reversed) timed
# as c50c timed the fused form, then the fused form again (the order's drift).
source "$(dirname "$0")/common.sh"
unapply_diff s50_fused_swiglu_quant.diff
gpu_build dsinfer
bench_flash main --batches 1 --fp8-mma
apply_diff s50_fused_swiglu_quant.diff
gpu_build dsinfer
bench_flash fused2 --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"
