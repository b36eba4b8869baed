#!/usr/bin/env bash
# Prepared in session 43 (not run: the device budget went to failed starts), carry [".devcarry"].
# The sparse attention's RoPE (cos, sin) once per block (FillRopeTable) instead of once per head,
# and the row kernel's query swizzle and key decode with kDim's constants
# (gpu_run/s43_rope_table.diff). ncu (c43b) had the row kernel's prologue, its 64 heads'
# double-precision sincos and the swizzle's runtime divisions, at 23% of its instructions. The
# same bits by construction. Main's kernels first, then the change on the same card:
# bench_attention (decode rows 1 and 32, the 8,192-token prefill) and the mode's model bench; then
# the attention op tests and the GPU suite with the time left. Last, ncu of the indexer's two
# kernels at the 8,192-token prefill (bench_indexer: 2,878 us a CSA layer on an H100, 22x its
# bound; c43b's launch-skip caught decode launches instead): launch 10 of each, after the one-row
# shape's 2 + 7.
source "$(dirname "$0")/common.sh"
attn() { timeout 100 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -; }
gpu_build dsinfer bench_attention
attn main
bench_flash mainmma --batches 1 --fp8-mma
apply_diff s43_rope_table.diff
gpu_build
attn new
bench_flash newmma --batches 1 --fp8-mma
grep -o '"attention_ms": [0-9.]*' "$OUT"/bench_*mma.jsonl
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
gpu_suite 200
for k in IndexerScoreTcKernel IndexerTopKKernel; do
  ncu_kernel $k 9 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc
done
echo "total $(( $(date +%s) - t0 )) s"
