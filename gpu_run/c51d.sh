#!/usr/bin/env bash
# Session 51, carry [".devcarry"]; the tree is main. Batch 1's routed experts (the FP4 GEMVs,
# about 2x their bytes where the dense FP8 ones are about 1.3x, round 15): bench_gemv's shapes at
# one row (pre-quantized inputs, as the MoE's decode path), then ncu of one launch of the routed
# w13 pair and of w2; then main's decode at batch 1 / 32 / 128 / 256 and the default's prefill.
source "$(dirname "$0")/common.sh"
gpu_build bench_gemv dsinfer
timeout 120 build-cuda/bin/bench_gemv --prequant > "$OUT/gemv.jsonl" 2>&1; echo "bench_gemv rc=$?"
grep -o '"shape": "[a-z_0-9]*"\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*' "$OUT/gemv.jsonl" | paste -d" " - - - | tr '\n' ';'; echo
for s in experts_w13 experts_w2; do
  ncu_kernel QLinearKernel 2 build-cuda/bin/bench_gemv --prequant --only $s
  for f in "$OUT"/QLinearKernel_details.txt "$OUT"/QLinearKernel_source.csv.xz "$OUT"/ncu_QLinearKernel.log; do
    [ -f "$f" ] && mv "$f" "${f/QLinearKernel/QLinearKernel_$s}"
  done
done
bench_flash all --batches 1,32,128,256
echo "total $(( $(date +%s) - t0 )) s"
