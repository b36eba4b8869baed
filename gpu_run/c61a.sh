#!/usr/bin/env bash
# Session 61's first call (about 7 minutes): the row attention's key pre-pass on by default (the
# working tree's flip: runtime.h, cuda_flags' --no-attention-row-prepass, gpu_test_main, ctest
# gpu_model_row_no_prepass for the form without it), the whole build, the mode's prefill and the
# default's decode with it, then the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
bench_flash mode --batches 1 --fp8-mma
bench_flash default --batches 1,32
gpu_suite 320
grep -E "gpu_model_row|gpu_attention_tc" "$OUT/ctest.log" | head
echo "total $(( $(date +%s) - t0 )) s"
