#!/usr/bin/env bash
# After c44a.sh on the same warm machine (its build-cuda kept), carry [".devcarry"]: the four
# diffs applied again (the tree comes fresh each call), the incremental build; the attention and
# the mode's model bench against c44a's main figures (with the new flags too), bench_indexer tc
# against tc_rows, and the attention's and the indexer's op tests.
source "$(dirname "$0")/common.sh"
for d in s44_expand_experts s44_tma_tokens_a s43_rope_table s43_indexer_runs; do apply_diff $d.diff; done
gpu_build
attn new
bench_flash newmma --batches 1 --fp8-mma
bench_flash allnew --batches 1 --fp8-mma --fp8mma-expand-experts --fp8mma-tma-tokens-a
grep -o '"attention_ms": [0-9.]*\|"indexer_topk_ms": [0-9.]*\|"attn_out_proj_ms": [0-9.]*' "$OUT"/bench_newmma.jsonl "$OUT"/bench_allnew.jsonl
timeout 60 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc,tc_rows > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer.jsonl" | paste -d" " - -
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test V4Fp8Cache rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -12
echo "total $(( $(date +%s) - t0 )) s"
