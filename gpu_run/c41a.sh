#!/usr/bin/env bash
# Session 41, first call. Carry [".devcarry"]. Everything built; the mode's op tests (the
# experts' last token tiles now on narrower wgmma: N 32 / 64 / 96) both expert kernels; the GPU
# suite (session 40's review mends never ran on a GPU); flash-l8 with and without --fp8-mma, and
# the mode's gather experts as the control against session 40's figures (same kind of card).
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
bench_flash mma --batches 1,32,128,256 --fp8-mma
bench_flash mma_gather --batches 1 --fp8-mma --no-fp8mma-ws-experts
bench_flash default --batches 1,32,128,256
timeout 330 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | head -16
echo "total $(( $(date +%s) - t0 )) s"
