#!/usr/bin/env bash
# Prepared in session 59 (about 1 minute on a warm machine): session 59's row attention ablation
# (gpu_run/s59_attn_row_nodecode.diff: no key decode, bits broken on purpose, never to land) with
# main's default P V on wgmma, where ptxas spills 196 bytes: what the spill leaves of c59c's
# -15 to -22% (measured with P V on mma.sync on both sides). main first, in the same call.
source "$(dirname "$0")/common.sh"
gpu_build bench_attention
attn_wg() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_wg_$1.jsonl" 2>&1; echo "bench_attention wgmma $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_wg_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  tail -2 "$OUT/attn_wg_$1.jsonl" | grep -i error
}
attn_wg main
apply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_wg nodecode
unapply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_wg main_again
echo "total $(( $(date +%s) - t0 )) s"
