#!/usr/bin/env bash
# Session 48, carry [".devcarry"]; the tree is main plus s48_hc_final.diff (uncommitted), now with
# the one-token post kernel's work written as a loop that runs once (119 registers instead of
# c48e's 128, as main's 118): c48e had that kernel's MoE post at 128 / 256 rows 5% over main's.
# bench_hc (all three kernels, out_hash against c48e's main, bench/results), the HcTest op tests,
# the model's figures of the day, the GPU suite. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
timeout 90 build-cuda/bin/bench_hc --kernels pre,post,post_moe --tokens 1,32,128,256,512,8192 > "$OUT/hcall_loop.jsonl" 2>&1; echo "bench_hc rc=$?"
grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hcall_loop.jsonl" | tr '\n' ';'; echo
diff <(grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' bench/results/gpu_h100_2026-12-06_s48_c48e_hcall_main.jsonl) <(grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hcall_loop.jsonl") && echo "out_hash: main's bits at every kernel and size" || echo "out_hash: DIFFERENT"
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test.log" 2>&1; echo "gpu_ops_test HcTest rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test.log" | head -12
bench_flash loop_mma --batches 1 --fp8-mma
bench_flash loop_default --batches 1,32,128,256
gpu_build
gpu_suite 240
echo "total $(( $(date +%s) - t0 )) s"
