#!/usr/bin/env bash
# Session 43, carry [".devcarry"]; c43e.sh cut to the budget left (about 5 minutes): the RoPE
# table's change against main's kernels on the same card at the kernel level only
# (bench_attention: decode rows 1 and 32, the 8,192-token prefill), then the attention op tests.
source "$(dirname "$0")/common.sh"
attn() { timeout 60 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -; }
git stash -q && gpu_build bench_attention gpu_attention_tc_test
attn main
git stash pop -q && gpu_build bench_attention gpu_attention_tc_test
attn new
timeout 60 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
echo "total $(( $(date +%s) - t0 )) s"
