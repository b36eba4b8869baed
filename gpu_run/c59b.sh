#!/usr/bin/env bash
# Session 59's two ceilings, measured before anything is built (about 4 minutes):
# * the routed experts with every expert 192 pairs (bench_fp8_gemm --balanced-routing) against
#   the uniform draw, where about half the experts need a second, partial token tile;
# * the FP8 cache's row attention with its keys copied as if stored bf16 in S's order, no decode
#   (gpu_run/s59_attn_row_nodecode.diff, the bits broken on purpose; never to land): what keys
#   made once per call could save at most. P V on mma.sync (--row-pv-sync) in both, where the
#   ablation does not spill; main's default (P V on wgmma) timed too.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm bench_attention
for f in "" --balanced-routing; do
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm${f/--/_}_$s.jsonl" 2>&1
    echo "gemm $f $s rc=$? $(grep -o '"most_pairs": [0-9]*\|"experts_over_192": [0-9]*\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm${f/--/_}_$s.jsonl" | tr '\n' ' ')"
  done
done
attn_sync() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp --row-pv-sync > "$OUT/attn_sync_$1.jsonl" 2>&1; echo "bench_attention sync $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_sync_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
}
attn main
attn_sync main
apply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_sync nodecode
attn_sync nodecode_again
unapply_diff s59_attn_row_nodecode.diff
gpu_build bench_attention
attn_sync main_again
echo "total $(( $(date +%s) - t0 )) s"
