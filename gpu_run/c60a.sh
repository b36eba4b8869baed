#!/usr/bin/env bash
# Prepared in session 59, never run (the device budget ran out after c59c; about 6 minutes): the
# FP4 experts' 256 tile (gpu_run/s59_experts_256.diff: up to 256 tokens a tile, each block's
# weights converted once for them, the wgmma in two halves of at most 128 tokens, 2 ring stages;
# off by default behind --fp8mma-experts-256 / bench --experts-256) and its hybrid
# (--fp8mma-experts-256-hybrid / bench --experts-256-hybrid: the 256 tile only for the slots past
# 192 pairs, the others on the 192 tile, in two launches, in case the 2-stage ring loses on
# them). Session 59 measured the ceiling: with every expert 192 pairs (--balanced-routing)
# expert_w1 / w2 run 17% / 15% faster than on the uniform draw, whose 132 experts past 192 pairs
# take a second, partial tile. In the order of what matters: the shapes with the 192 tile and
# both forms (uniform draw, then w1 balanced), the forms' bits (gpu_fp8mma_test's experts with
# each flag, then without: the diff adds T 440 / 470 / 600), the mode's prefill each way. Should
# one win, the next call (c60c.sh) makes it the default and runs the GPU suite.
source "$(dirname "$0")/common.sh"
apply_diff s59_experts_256.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test
for r in "" --balanced-routing; do
  for f in "" --experts-256 --experts-256-hybrid; do
    for s in expert_w1 expert_w2; do
      [ -n "$r" ] && [ "$s" = expert_w2 ] && continue
      o=$(timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f $r 2>&1)
      echo "gemm $r $f $s rc=$? $(echo "$o" | grep -o '"experts_over_192": [0-9]*\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*\|"mismatches": [0-9]*' | tr '\n' ' ')"
      echo "$o" >> "$OUT/gemm_all.jsonl"
    done
  done
done
# (The default's run last, after the trace: ExpertsMatchCpuBitForBit took 37.5 s in c58e with
# eight T, and the diff adds three larger ones.)
for m in --fp8mma-experts-256 --fp8mma-experts-256-hybrid; do
  timeout 150 build-cuda/bin/gpu_fp8mma_test --gtest_filter='*Expert*' $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test experts $m rc=$? $(grep -c '^\[       OK' "$OUT/fp8mma_test$m.log") ok $(( $(date +%s) - t0 )) s"
  grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test$m.log" | head -12
done
gpu_build dsinfer
bench_flash mode_256 --batches 1 --fp8-mma --fp8mma-experts-256
bench_flash mode_256h --batches 1 --fp8-mma --fp8mma-experts-256-hybrid
bench_flash mode --batches 1 --fp8-mma
# Session 60: main's prefill kernels (the diff's forms are off by default), for the parts outside
# the experts and the attention (the last trace was session 56's, before its changes landed).
prefill_trace main
timeout 150 build-cuda/bin/gpu_fp8mma_test --gtest_filter='*Expert*' > "$OUT/fp8mma_test.log" 2>&1; echo "gpu_fp8mma_test experts (default) rc=$? $(grep -c '^\[       OK' "$OUT/fp8mma_test.log") ok $(( $(date +%s) - t0 )) s"
grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test.log" | head -12
unapply_diff s59_experts_256.diff
echo "total $(( $(date +%s) - t0 )) s"
