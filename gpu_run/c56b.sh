#!/usr/bin/env bash
# Session 56, after c56a: s55_experts_tma2.diff with the TMA experts' tile on by default (the
# option's default flipped by sed on the device): the whole GPU suite, then flash-l8's mode bench.
source "$(dirname "$0")/common.sh"
apply_diff s55_experts_tma2.diff
sed -i 's/bool fp8mma_tma_experts = false;/bool fp8mma_tma_experts = true;/' src/backend/cuda/runtime.h
sed -i 's/k.fp8mma_tma_experts = flags.Has("fp8mma-tma-experts");/k.fp8mma_tma_experts = true;/' src/cli/cuda_flags.cc
grep -rn "fp8mma_tma_experts = true" src | head -3
gpu_build
gpu_suite 330
bench_flash tma_def_mode --batches 1,32,128,256 --fp8-mma
sed -i "s/bool fp8mma_tma_experts = true;/bool fp8mma_tma_experts = false;/" src/backend/cuda/runtime.h
sed -i 's/k.fp8mma_tma_experts = true;/k.fp8mma_tma_experts = flags.Has("fp8mma-tma-experts");/' src/cli/cuda_flags.cc
unapply_diff s55_experts_tma2.diff
echo "total $(( $(date +%s) - t0 )) s"
