#!/usr/bin/env bash
# c59b's row attention ablation again, its cp.async sources 16-byte aligned (c59b's aborted:
# misaligned address).
source "$(dirname "$0")/common.sh"
attn_sync() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp --row-pv-sync > "$OUT/attn_sync_$1.jsonl" 2>&1; echo "bench_attention sync $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_sync_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  tail -2 "$OUT/attn_sync_$1.jsonl" | grep -i error
}
gpu_build bench_attention
attn_sync main
apply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_sync nodecode
unapply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_sync main_again
echo "total $(( $(date +%s) - t0 )) s"
