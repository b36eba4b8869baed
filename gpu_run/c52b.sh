#!/usr/bin/env bash
# Session 52, carry [".devcarry"]; the tree is main. The GPU suite with the persistent bf16
# few-row tile (s52_bf16_few_persistent.diff), then batch 1 / 32 / 128 / 256 with it.
source "$(dirname "$0")/common.sh"
apply_diff s52_bf16_few_persistent.diff
gpu_build
gpu_suite 400
bench_flash all_pers --batches 1,32,128,256
unapply_diff s52_bf16_few_persistent.diff
echo "total $(( $(date +%s) - t0 )) s"
