#!/usr/bin/env bash
# Session 55 (run: docs/perf.md "Session 55"; s55_experts_tma.diff rejected and deleted, so this is
# a record). Carry [".devcarry"]; the tree is main. Two parts (LIMIT: seconds, default 420):
# 1. Where the routed FP4 experts' time goes, by ablation. s55_experts_ablate.diff (never to land:
#    it breaks the bits) instantiates the warp-specialized experts' kernel with parts removed,
#    picked by DSINFER_ABLATE at launch: 1 no e2m1 -> e4m3 conversion (the raw bytes as codes),
#    2 no promotion products (acc += r), 4 no token gather by the producer (the stage's token
#    bytes stale), 3 = 1 + 2, 7 = all three. bench_fp8_gemm's expert_w1 / expert_w2 for each
#    (mismatches expected in all but 0).
# 2. s55_experts_tma.diff: the same tile fed by the TMA (--fp8mma-tma-experts / bench_fp8_gemm
#    --tma-experts): the pairs' act_quant codes and scales gathered into list order, then one
#    producer warp's bulk copies a stage. Its bits (gpu_fp8mma_test with the flag), bench_fp8_gemm
#    against main's tile, the mode's prefill both ways; ncu of its w1 launch if time is left.
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-420} - ($(date +%s) - t0) )); }
apply_diff s55_experts_ablate.diff
gpu_build bench_fp8_gemm
for a in 0 1 2 4 3 7; do
  for s in expert_w1 expert_w2; do
    DSINFER_ABLATE=$a timeout 60 build-cuda/bin/bench_fp8_gemm --sample 16 --only $s > "$OUT/abl${a}_$s.jsonl" 2>&1
    echo "ablate $a $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/abl${a}_$s.jsonl" | tr '\n' ' ')"
  done
done
unapply_diff s55_experts_ablate.diff
apply_diff s55_experts_tma.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test dsinfer
for m in "" "--fp8mma-tma-experts"; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "PASSED|FAILED|Failure" -A3 "$OUT/fp8mma_test$m.log" | head -10
done
gemm_experts_ab --tma-experts
if [ "$(left)" -gt 60 ]; then
  bench_flash mma_main --batches 1 --fp8-mma
  bench_flash mma_tma --batches 1 --fp8-mma --fp8mma-tma-experts
fi
[ "$(left)" -gt 30 ] && ncu_kernel MmaWsExpertKernel 1 build-cuda/bin/bench_fp8_gemm --sample 16 --only expert_w1 --tma-experts
unapply_diff s55_experts_tma.diff
echo "total $(( $(date +%s) - t0 )) s"
