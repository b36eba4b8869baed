#!/usr/bin/env bash
# Session 47, carry [".devcarry"]: ncu of the mHC kernels at 8,192 tokens on main (the post with the
# MoE combine and the next mix, the post after attention, the split pre finish), for the next
# design: what bounds them (c47e: the post's weights as float4 made it slower, so not its shared
# loads). No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_hc
ncu_kernel HcPostMixKernel 0 build-cuda/bin/bench_hc --tokens 8192 --kernels post_moe
mv "$OUT/HcPostMixKernel_details.txt" "$OUT/HcPostMixKernel_moe_details.txt"; mv "$OUT/HcPostMixKernel_source.csv.xz" "$OUT/HcPostMixKernel_moe_source.csv.xz"
ncu_kernel HcPostMixKernel 0 build-cuda/bin/bench_hc --tokens 8192 --kernels post
ncu_kernel HcPreFinishSplitKernel 0 build-cuda/bin/bench_hc --tokens 8192 --kernels pre
echo "total $(( $(date +%s) - t0 )) s"
