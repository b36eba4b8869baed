#!/usr/bin/env bash
# Session 50, carry [".devcarry"], kind nvidia-h200; the tree is main. Main's figures on an H200
# (the issue's goals are stated on one; the last H200 run of main was session 45's): flash-l8's
# decode at batch 1 / 32 / 128 / 256 and the 8,192-token prefill, default and --fp8-mma, with
# their eager profiles (batch 256's gives the full-model-equivalent).
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash default --batches 1,32,128,256
bench_flash mma --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"
