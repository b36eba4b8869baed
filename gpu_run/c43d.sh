#!/usr/bin/env bash
# Prepared in session 42 (not run), carry [".devcarry"]. The mHC post kernel's many-token path two
# tokens at a time (gpu_run/s42_hc_post_pairs.diff): both tokens' mix dot products share each
# next-mix weight's shared-memory load (100 loads a column and token before: session 39's ncu had
# the kernel 63% issue-busy with DRAM at 66%), the inputs of the next pair loading while the
# pair's mix computes. Each token's operations are the one-token order: the same bits. bench_hc
# (post, post_moe at 8,192 and 256 tokens) against main's kernel on the same card, the mHC op
# tests, the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build bench_hc gpu_ops_test
timeout 120 build-cuda/bin/bench_hc --tokens 256,8192 --kernels post,post_moe > "$OUT/hc_main.jsonl" 2>&1; echo "bench_hc main rc=$?"; grep '"hc"' "$OUT/hc_main.jsonl" | cut -c1-200
apply_diff s42_hc_post_pairs.diff
gpu_build
timeout 120 build-cuda/bin/bench_hc --tokens 256,8192 --kernels post,post_moe > "$OUT/hc_pairs.jsonl" 2>&1; echo "bench_hc pairs rc=$?"; grep '"hc"' "$OUT/hc_pairs.jsonl" | cut -c1-200
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='*Hc*' > "$OUT/hc_ops.log" 2>&1; echo "gpu_ops_test Hc rc=$?"; grep -E "PASSED|FAILED" "$OUT/hc_ops.log" | head -5
bench_flash mma --batches 1 --fp8-mma
gpu_suite 300
echo "total $(( $(date +%s) - t0 )) s"
