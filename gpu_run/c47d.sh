#!/usr/bin/env bash
# Session 47, carry [".devcarry"]: main (7371e69 + docs) on one card: the GPU suite, then the
# headline figures of the day: the default's decode (batch 1 / 32 / 128 / 256) and 8,192-token
# prefill, the mode's 8,192 / 32,768 / 131,072-token prefills. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build
gpu_suite 330
bench_flash default --batches 1,32,128,256
bench_flash mma --batches 1 --fp8-mma
long32k main
p128 main
echo "total $(( $(date +%s) - t0 )) s"
