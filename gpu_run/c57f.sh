#!/usr/bin/env bash
# Session 57's last device minutes (c57e cut down to fit about 2.5 minutes): main's experts'
# shapes, then s57_e2m1.diff (the conversion in five instructions): the host check of every input
# and shift, gpu_fp8mma_test, the shapes again.
source "$(dirname "$0")/common.sh"
ex() {  # name
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s > "$OUT/gemm_$1_$s.jsonl" 2>&1
    echo "gemm $1 $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_$1_$s.jsonl" | tr '\n' ' ')"
  done
}
gpu_build bench_fp8_gemm gpu_fp8mma_test
ex main
apply_diff s57_e2m1.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test
build-cuda/bin/bench_fp8_gemm --host-check; echo "host check rc=$?"
timeout 60 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test_e2m1.log" 2>&1; echo "gpu_fp8mma_test (e2m1) rc=$?"
grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test_e2m1.log" | head -12
ex e2m1
unapply_diff s57_e2m1.diff
echo "total $(( $(date +%s) - t0 )) s"
