#!/usr/bin/env bash
# Session 47, carry [".devcarry"]. The row attention's prologue (c47h) and its epilogue: all 64
# heads' output rows staged at once over the queries, keys and scores, one FinishTile on them (a
# function of its own, as the prologue: inlined, ptxas spilled in the chunk loop), instead of
# four tiles through a 16-row staging area with three barriers each (s47_attn_row_epilogue.diff,
# which holds both; the staging area is gone: 32 KB less shared memory). The tree holds it: the
# attention's bit tests, bench_attention, the mode's prefill and the default's decode at batch
# 256 (row blocks), the GPU suite; then main (the diff reversed), the same figures.
source "$(dirname "$0")/common.sh"
gpu_build
timeout 150 build-cuda/bin/gpu_attention_tc_test > "$OUT/attn_tc_test.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/attn_tc_test.log" | head -10
timeout 100 build-cuda/bin/bench_attention --rows 32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_epilogue.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_epilogue.jsonl" | paste -d" " - -
bench_flash epilogue_mma --batches 1 --fp8-mma
bench_flash epilogue_default --batches 256
gpu_suite 300
git apply -R gpu_run/s47_attn_row_epilogue.diff || { echo "reverse failed"; exit 1; }
gpu_build bench_attention dsinfer
timeout 100 build-cuda/bin/bench_attention --rows 32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_main.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_main.jsonl" | paste -d" " - -
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 256
git apply gpu_run/s47_attn_row_epilogue.diff
echo "total $(( $(date +%s) - t0 )) s"
