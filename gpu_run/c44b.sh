#!/usr/bin/env bash
# After c44a.sh on the same warm machine (its build-cuda kept), carry [".devcarry"]: the four
# diffs applied again (the tree comes fresh each call), the incremental build, the attention's and
# the indexer's op tests, the GPU suite, then ncu of the expanded experts' two kernels
# (bench_fp8_gemm's expert_w1: its warm-up launch's chunks first) and of the indexer's kernels at
# the prefill.
source "$(dirname "$0")/common.sh"
for d in s44_expand_experts s44_tma_tokens_a s43_rope_table s43_indexer_runs; do apply_diff $d.diff; done
gpu_build
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test V4Fp8Cache rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -12
gpu_suite 200
# (Most wanted first: the call may end before the last.) The indexer's launch order: the one-row
# shape (tc, tc_rows: 9 launches each), then the prefill (tc: the run kernel, tc_rows:
# IndexerScoreTcKernel<4>; the top-k after each).
ncu_kernel MmaTmaExpertKernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
ncu_kernel MmaExpandFp4Kernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
ncu_kernel IndexerScoreTcKernel 18 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
echo "total $(( $(date +%s) - t0 )) s"
