#!/usr/bin/env bash
# Session 57, after c57c/c57d: s57_e2m1.diff (the e2m1 -> e4m3 conversion in five instructions
# instead of seven: the signs by one prmt; bench_fp8_gemm --host-check checks it on every input
# and shift) on main's register-A experts' tile, A/B on one card; then s57_experts_ss2.diff on top
# (the shared-memory form with each producer thread copying its own row: no producer barrier).
# Trimmed to the kernels' benches (about 4 minutes): the device budget was nearly spent.
source "$(dirname "$0")/common.sh"
ex() {  # name
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s > "$OUT/gemm_$1_$s.jsonl" 2>&1
    echo "gemm $1 $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_$1_$s.jsonl" | tr '\n' ' ')"
  done
}
gpu_build bench_fp8_gemm gpu_fp8mma_test gpu_model_test
ex main
apply_diff s57_e2m1.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test gpu_model_test
build-cuda/bin/bench_fp8_gemm --host-check; echo "host check rc=$?"
fp8mma_tests
timeout 60 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8Mma*' > "$OUT/model_test.log" 2>&1; echo "gpu_model_test rc=$?"
ex e2m1
apply_diff s57_experts_ss2.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test
timeout 60 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test_ss2.log" 2>&1; echo "gpu_fp8mma_test (ss2) rc=$?"
grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test_ss2.log" | head -12
ex ss2
unapply_diff s57_experts_ss2.diff
unapply_diff s57_e2m1.diff
echo "total $(( $(date +%s) - t0 )) s"
