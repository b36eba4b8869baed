#!/usr/bin/env bash
# Prepared in session 58 for the next session's first call (about 5 minutes; ask for an H200
# first: the goals' card, whose figures are still session 52's). Main's figures: flash-l8 with the
# FP8 cache by default (decode batches 1 / 32 / 128 / 256, the 8,192-token prefill) and in the
# mode (batch 1, the prefill, 32,768 tokens in chunks of 8,192), the experts' shapes with the wide
# tile and without, then the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
bench_flash main_default --batches 1,32,128,256
bench_flash main_mode --batches 1 --fp8-mma
long32k main
for f in "" --no-wide-experts; do
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm${f/--/_}_$s.jsonl" 2>&1
    echo "gemm $f $s rc=$? $(grep -o '"us": [0-9.]*\|"tflops": [0-9.]*\|"ratio_to_bound": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm${f/--/_}_$s.jsonl" | tr '\n' ' ')"
  done
done
gpu_suite 280
echo "total $(( $(date +%s) - t0 )) s"
