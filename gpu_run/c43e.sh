#!/usr/bin/env bash
# Session 43, carry [".devcarry"]. The sparse attention's RoPE (cos, sin) once per block
# (FillRopeTable) instead of once per head, and the row kernel's query swizzle with kDim's
# constant divisions (ncu c43b: the row kernel's prologue, its 64 heads' double-precision sincos
# and that loop's index maths, was 23% of its instructions). The same bits by construction: the
# attention op tests, the model bench (default and --fp8-mma) against main's rebuilt from a stash
# on the same card, the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
attn() { timeout 100 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -; }
attn new
bench_flash newmma --batches 1 --fp8-mma
grep -ho '"attention_ms": [0-9.]*' "$OUT"/bench_new*.jsonl | tr '\n' ' '; echo
gpu_suite 150
git stash -q && gpu_build dsinfer bench_attention
attn main
bench_flash mainmma --batches 1 --fp8-mma
grep -ho '"attention_ms": [0-9.]*' "$OUT"/bench_main*.jsonl | tr '\n' ' '; echo
git stash pop -q
echo "total $(( $(date +%s) - t0 )) s"
