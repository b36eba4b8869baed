#!/usr/bin/env bash
# Session 45, carry [".devcarry"]; the tree carries the expansion (s44_expand_experts.diff with the
# pairs' scales bulk-loaded from their 16-byte boundary instead of c44a's scale TMA at a pair's
# unaligned coordinate, which faulted: compute-sanitizer's illegal instruction in c45a). The
# FP8-linear bit tests under both expert paths, bench_fp8_gemm's routed shapes both ways, the
# mode's model bench both ways, the GPU suite (main's landed RoPE table and indexer runs too), then
# ncu of the expanded experts' TMA tile if time is left.
source "$(dirname "$0")/common.sh"
gpu_build
for m in "" "--fp8mma-expand-experts"; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "FAILED|Failure|error" -A4 "$OUT/fp8mma_test$m.log" | head -12
done
gemm ws_w1 --only expert_w1
gemm ws_w2 --only expert_w2
gemm expand_w1 --fp8mma-expand-experts --only expert_w1
gemm expand_w2 --fp8mma-expand-experts --only expert_w2
bench_flash mma --batches 1 --fp8-mma
bench_flash expand --batches 1 --fp8-mma --fp8mma-expand-experts
gpu_suite 200
[ $(( $(date +%s) - t0 )) -lt 480 ] && ncu_kernel MmaTmaExpertKernel 0 build-cuda/bin/bench_fp8_gemm --fp8mma-expand-experts --only expert_w1 --sample 0
echo "total $(( $(date +%s) - t0 )) s"
