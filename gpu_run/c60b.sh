#!/usr/bin/env bash
# Prepared in session 59, changed in session 60 (about 1.5 minutes on a warm machine): the row
# attention ablation without its key decode (bits broken on purpose, never to land) with main's
# default P V on wgmma, against main in the same call.
# * s59_attn_row_nodecode.diff: session 59's form, where ptxas spills 196 bytes with P V on wgmma.
# * s60_attn_row_nodecode_n32.diff: the same ablation without the spill (ptxas here: 127
#   registers, none spilled): the softmax's running max and sum per head in shared memory (8
#   registers fewer) and P V's wgmma in four pieces of 32 positions (m64n32, the same per-element
#   operations) instead of two of 64.
# What a per-call bf16 key pre-pass could gain with P V on wgmma (c59c measured -15 to -22% with
# both sides on mma.sync).
source "$(dirname "$0")/common.sh"
gpu_build bench_attention
attn_wg() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_wg_$1.jsonl" 2>&1; echo "bench_attention wgmma $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_wg_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  tail -2 "$OUT/attn_wg_$1.jsonl" | grep -i error
}
attn_wg main
for d in s60_attn_row_nodecode_n32 s59_attn_row_nodecode; do
  apply_diff $d.diff
  gpu_build bench_attention
  attn_wg $d
  unapply_diff $d.diff
done
gpu_build bench_attention
attn_wg main_again
echo "total $(( $(date +%s) - t0 )) s"
