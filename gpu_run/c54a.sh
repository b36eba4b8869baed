#!/usr/bin/env bash
# Session 54, carry [".devcarry"]; run on one H100 (raw logs bench/results/gpu_h100_2026-12-07_s54_*,
# docs/perf.md "Session 54"). It ran with the warp-specialized row block in the tree
# (KernelOptions::attention_row_ws, --attention-row-ws / bench_attention --row-ws; off by default);
# measured slower, that form was deleted (a record: s54_attn_row_ws.diff, which this script
# applies first, is gone; s54_attn_row_ws2.diff keeps its S, softmax, P V and epilogue).
# Its bits against the per-tile blocks (gpu_attention_tc_test's RowBlock tests under the flag), then
# bench_attention's FP8-cache attention (tc_packed_qp) at rows 1 / 32 / 128 / 256 and the 8,192-token
# prefill, main's row block and the ws form, and the model: the mode's prefill and decode at batch
# 128 / 256 (the row block's sizes) both ways. The ws kernel's SASS (its spills: ptxas reports
# 144 bytes) into $OUT. Then, time left, c53b's head forms.
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - t0) )); }
apply_diff s54_attn_row_ws.diff
gpu_build dsinfer bench_attention gpu_attention_tc_test bench_qgemm
timeout 120 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' --attention-row-ws > "$OUT/row_ws_test.log" 2>&1; echo "row ws op test rc=$?"
grep -E "PASSED|FAILED|Failure|Expected|Which is|row block ran|warp-spec" "$OUT/row_ws_test.log" | head -16
o=$(ls build-cuda/src/backend/cuda/CMakeFiles/dsinfer_backend_cuda.dir/attention_sparse_tc_row_sm90.cu.o 2>/dev/null)
[ -n "$o" ] && cuobjdump -sass "$o" > "$OUT/row_sass.txt" 2>&1 && xz -9 "$OUT/row_sass.txt"
ws_bench() {  # name, flags...
  local n=$1; shift
  timeout 100 build-cuda/bin/bench_attention --rows 1,32,128,256 --prefill 8192 --variants tc_packed_qp "$@" > "$OUT/attn_$n.jsonl" 2>&1; echo "bench_attention $n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$n.jsonl" | paste -d" " - - | tr '\n' ';'; echo
}
ws_bench main
ws_bench ws --row-ws
if [ "$(left)" -gt 120 ]; then
  bench_flash mma_main --batches 128,256 --fp8-mma
  bench_flash mma_ws --batches 128,256 --fp8-mma --attention-row-ws
fi
echo "left $(left) s"
if [ "$(left)" -gt 150 ]; then
  bf16q main 1 head
  apply_diff s52_bf16_few_two_row_tiles.diff  # (deleted after this run: a record)
  gpu_build bench_qgemm gpu_ops_test
  timeout 100 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
  grep -E "PASSED|FAILED|Failure" "$OUT/bf16_ops_test.log" | head -6
  bf16q wm2 1 head
  unapply_diff s52_bf16_few_two_row_tiles.diff
fi
unapply_diff s54_attn_row_ws.diff
echo "total $(( $(date +%s) - t0 )) s"
