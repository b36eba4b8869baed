#!/usr/bin/env bash
# Session 59: the FP4 experts' split tile (--fp8mma-split-experts: up to 256 tokens a tile, each
# block's weights converted once for them, the wgmma in two halves; 2 ring stages), in the order
# of what matters most with little device time left: the experts' shapes with the 192 tile and
# with the split one (the uniform draw; then w1 on --balanced-routing), the split tile's bits
# (gpu_fp8mma_test's experts with the flag), then the mode's prefill both ways.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm gpu_fp8mma_test
for r in "" --balanced-routing; do
  for f in "" --split-experts; do
    for s in expert_w1 expert_w2; do
      [ -n "$r" ] && [ "$s" = expert_w2 ] && continue
      o=$(timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f $r 2>&1)
      echo "gemm $r $f $s rc=$? $(echo "$o" | grep -o '"experts_over_192": [0-9]*\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*\|"mismatches": [0-9]*' | tr '\n' ' ')"
      echo "$o" >> "$OUT/gemm_all.jsonl"
    done
  done
done
m=--fp8mma-split-experts
timeout 120 build-cuda/bin/gpu_fp8mma_test --gtest_filter='*Expert*' $m > "$OUT/fp8mma_test_split.log" 2>&1; echo "gpu_fp8mma_test experts $m rc=$? $(grep -c '^\[       OK' "$OUT/fp8mma_test_split.log") ok $(( $(date +%s) - t0 )) s"
grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test_split.log" | head -12
gpu_build dsinfer
bench_flash mode_split --batches 1 --fp8-mma --fp8mma-split-experts
bench_flash mode --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"
