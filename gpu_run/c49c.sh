#!/usr/bin/env bash
# A record of what ran (session 49): its diff was measured, rejected and deleted; figures in
# docs/perf.md "Session 49".
# Session 49, carry [".devcarry"]; the tree is main. The mode's two warp-specialized FP8 kernels
# (the dense TMA tile, the routed experts) with their consumer warpgroups taking turns at the
# tensor cores (s49_mma_turns.diff: named barriers, warpgroup 0 issues a stage's MMAs, then 1,
# then 0 the next; each one's operations unchanged). c49a's ncu of the dense tile on wo_b: the
# tensor pipe 42.7% busy, the wgmma wait the largest stall, both warpgroups promoting at once.
# Main first, then the diff: bench_fp8_gemm (every flash-l8 shape, 256 outputs checked), the
# mode's 8,192-token prefill and batch-1 decode; with the diff, gpu_fp8mma_test on both expert
# kernels and the GPU suite. No git stash / checkout.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm dsinfer gpu_fp8mma_test
gemm main
bench_flash main_mma --batches 1 --fp8-mma
apply_diff s49_mma_turns.diff
gpu_build bench_fp8_gemm dsinfer gpu_fp8mma_test
fp8mma_tests
gemm turns
bench_flash turns_mma --batches 1 --fp8-mma
gpu_build
gpu_suite 240
git apply -R gpu_run/s49_mma_turns.diff
echo "total $(( $(date +%s) - t0 )) s"
