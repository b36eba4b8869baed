#!/usr/bin/env bash
# Prepared in session 54, run in session 55 (docs/perf.md "Session 55"; its diff, rejected, is
# deleted, so this is a record). Carry [".devcarry"]; the tree is main. It
# applies s54_attn_row_ws2.diff, the pipelined row block (KernelOptions::attention_row_ws,
# --attention-row-ws / bench_attention --row-ws; off by default):
# two warpgroups that decode their own keys into a four-stage ring while S runs (c54a's form had a
# producer warpgroup, which set the pace), its query staging loading all of a warp's heads at once.
# Its bits (the RowBlock op tests under the flag), then
# bench_attention's FP8-cache attention at rows 128 / 256 and the 8,192-token prefill: main, main's
# row block with the diff's query staging, and the pipelined one; and the mode's prefill both
# ways; ncu of its SWA prefill launch.
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-400} - ($(date +%s) - t0) )); }
# The diff also moves main's row block onto the same query staging (all of a warp's heads' loads in
# flight at once), so main without it is timed first.
gpu_build bench_attention
ws_bench() {  # name, flags...
  local n=$1; shift
  timeout 100 build-cuda/bin/bench_attention --rows 128,256 --prefill 8192 --variants tc_packed_qp "$@" > "$OUT/attn_$n.jsonl" 2>&1; echo "bench_attention $n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$n.jsonl" | paste -d" " - - | tr '\n' ';'; echo
}
ws_bench base
apply_diff s54_attn_row_ws2.diff
gpu_build dsinfer bench_attention gpu_attention_tc_test
timeout 120 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' > "$OUT/row_test.log" 2>&1; echo "row op test (the new staging) rc=$?"
grep -E "PASSED|FAILED|Failure" "$OUT/row_test.log" | head -4
timeout 120 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' --attention-row-ws > "$OUT/row_ws2_test.log" 2>&1; echo "row ws2 op test rc=$?"
grep -E "PASSED|FAILED|Failure|Expected|Which is|row block ran|pipelined" "$OUT/row_ws2_test.log" | head -12
ws_bench main
ws_bench ws2 --row-ws
if [ "$(left)" -gt 100 ]; then
  bench_flash mma_main --batches 256 --fp8-mma
  bench_flash mma_ws2 --batches 256 --fp8-mma --attention-row-ws
fi
[ "$(left)" -gt 40 ] && ncu_kernel SparseAttentionTcRowWs 0 build-cuda/bin/bench_attention --rows 1 --prefill 8192 --kinds swa --variants tc_packed_qp --row-ws
unapply_diff s54_attn_row_ws2.diff
echo "total $(( $(date +%s) - t0 )) s"
