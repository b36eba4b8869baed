#!/usr/bin/env bash
# Session 55, carry [".devcarry"]: where the routed FP4 experts' time goes, by ablation.
# s55_experts_ablate.diff (never to land: it breaks the bits) instantiates the warp-specialized
# experts' kernel with parts removed, picked by DSINFER_ABLATE at launch: 1 no e2m1 -> e4m3
# conversion (the raw bytes as codes), 2 no promotion products (acc += r), 4 no token gather by
# the producer (the stage's token bytes stale), 3 = 1 + 2, 7 = all three. bench_fp8_gemm's
# expert_w1 / expert_w2 for each (mismatches expected in all but 0), then ncu
# of main's expert_w1 launch (source-level samples).
source "$(dirname "$0")/common.sh"
apply_diff s55_experts_ablate.diff
gpu_build bench_fp8_gemm
for a in 0 1 2 4 3 7; do
  for s in expert_w1 expert_w2; do
    DSINFER_ABLATE=$a timeout 60 build-cuda/bin/bench_fp8_gemm --sample 16 --only $s > "$OUT/abl${a}_$s.jsonl" 2>&1
    echo "ablate $a $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/abl${a}_$s.jsonl" | tr '\n' ' ')"
  done
done
unapply_diff s55_experts_ablate.diff
gpu_build bench_fp8_gemm
ncu_kernel MmaWsExpertKernel 0 build-cuda/bin/bench_fp8_gemm --sample 16 --only expert_w1
echo "total $(( $(date +%s) - t0 )) s"
