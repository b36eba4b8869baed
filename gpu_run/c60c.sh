#!/usr/bin/env bash
# Prepared in session 60, for after c60a: the experts' 256 tile (gpu_run/s59_experts_256.diff)
# made the default in the form c60a found faster ($1: 256, or hybrid), then the GPU suite and
# flash-l8's figures with it. The default is flipped by sed here (runtime.h's two defaults, and
# cuda_flags.cc's switches read as --no-...), since the landing commit will be written from what
# this says. (Not reversed: the next call brings its own copy of the tree, and build-cuda/.diff_files
# makes these files newer than the objects it keeps.)
source "$(dirname "$0")/common.sh"
form=${1:?256 or hybrid}
apply_diff s59_experts_256.diff
sed -i 's/bool fp8mma_experts_256 = false;/bool fp8mma_experts_256 = true;/' src/backend/cuda/runtime.h
[ "$form" = hybrid ] && sed -i 's/bool fp8mma_experts_256_hybrid = false;/bool fp8mma_experts_256_hybrid = true;/' src/backend/cuda/runtime.h
sed -i 's/k.fp8mma_experts_256 = flags.Has("fp8mma-experts-256") || flags.Has("fp8mma-experts-256-hybrid");/k.fp8mma_experts_256 = !flags.Has("no-fp8mma-experts-256");/' src/cli/cuda_flags.cc
[ "$form" = hybrid ] && sed -i 's/k.fp8mma_experts_256_hybrid = flags.Has("fp8mma-experts-256-hybrid");/k.fp8mma_experts_256_hybrid = !flags.Has("no-fp8mma-experts-256-hybrid");/' src/cli/cuda_flags.cc
git diff --stat src/backend/cuda/runtime.h src/cli/cuda_flags.cc | tail -1
grep -n "bool fp8mma_experts_256" src/backend/cuda/runtime.h; grep -n "k.fp8mma_experts_256" src/cli/cuda_flags.cc
echo src/backend/cuda/runtime.h src/cli/cuda_flags.cc >> build-cuda/.diff_files
gpu_build
gpu_suite 330
bench_flash mode_$form --batches 1 --fp8-mma
long32k $form
echo "total $(( $(date +%s) - t0 )) s"
