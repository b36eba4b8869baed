#!/usr/bin/env bash
# Session 45, after c44a.sh on the same machine, carry [".devcarry"]: c44b's attention, model and
# indexer figures without the expansion (it hit an illegal instruction in c44a), and
# compute-sanitizer on the expansion's op test to find the faulting kernel.
source "$(dirname "$0")/common.sh"
for d in s44_expand_experts s44_tma_tokens_a s43_rope_table s43_indexer_runs; do apply_diff $d.diff; done
gpu_build
timeout 120 compute-sanitizer --show-backtrace device build-cuda/bin/gpu_fp8mma_test --fp8mma-expand-experts --gtest_filter='*Experts*' > "$OUT/sanitizer.log" 2>&1; echo "sanitizer rc=$?"
grep -E "Illegal|Invalid|at 0x|by thread|Kernel|=========" "$OUT/sanitizer.log" | head -30
attn new
bench_flash newmma --batches 1 --fp8-mma
grep -o '"attention_ms": [0-9.]*\|"indexer_topk_ms": [0-9.]*\|"attn_out_proj_ms": [0-9.]*' "$OUT"/bench_newmma.jsonl
timeout 60 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc,tc_rows > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer.jsonl" | paste -d" " - -
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test V4Fp8Cache rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -12
echo "total $(( $(date +%s) - t0 )) s"
