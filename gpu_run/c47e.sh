#!/usr/bin/env bash
# Session 47, carry [".devcarry"]. The mHC post's next-mix weights as one float4 an output
# (s47_hc_post_float4.diff: 24 16-byte shared loads a token and column instead of 96 4-byte ones,
# the same fmaf chains in the same order). The tree holds the change: the mHC op tests (the
# partials bit for bit), bench_hc, the default's decode (batch 1 / 256) and 8,192-token prefill,
# the mode's prefill; ncu of the row attention's SWA launch (for the next design); then the diff
# reversed (main) and the same figures. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_hc gpu_ops_test dsinfer bench_attention
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_tests.log" 2>&1; echo "HcTest rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_tests.log" | head -12
timeout 60 build-cuda/bin/bench_hc > "$OUT/hc_f4.jsonl" 2>&1; echo "bench_hc f4 rc=$?"; grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hc_f4.jsonl"
bench_flash f4_default --batches 1,256
bench_flash f4_mma --batches 1 --fp8-mma
ncu_kernel SparseAttentionTcRowKernel 0 build-cuda/bin/bench_attention --rows 1 --prefill 8192 --kinds swa --variants tc_packed_qp
git apply -R gpu_run/s47_hc_post_float4.diff || { echo "reverse failed"; exit 1; }
gpu_build bench_hc dsinfer
timeout 60 build-cuda/bin/bench_hc > "$OUT/hc_main.jsonl" 2>&1; echo "bench_hc main rc=$?"; grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hc_main.jsonl"
bench_flash main_default --batches 1,256
bench_flash main_mma --batches 1 --fp8-mma
git apply gpu_run/s47_hc_post_float4.diff
echo "total $(( $(date +%s) - t0 )) s"
