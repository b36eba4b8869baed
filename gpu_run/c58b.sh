#!/usr/bin/env bash
# Session 58, second call (about 4 minutes): the experts' wide token tiles (192 tokens,
# KernelOptions::fp8mma_wide_experts) against main's 128 on one card: their bits
# (gpu_fp8mma_test with and without), bench_fp8_gemm's routed experts' shapes (us, mismatches),
# the mode's 8,192-token prefill, then ncu of the wide tile on expert_w1. Logs into one archive.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_fp8_gemm gpu_fp8mma_test
for f in "" --fp8mma-wide-experts; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $f > "$OUT/fp8mma_test$f.log" 2>&1; echo "gpu_fp8mma_test $f rc=$?"
  grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test$f.log" | head -12
done
for f in "" --wide-experts; do
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm${f}_$s.jsonl" 2>&1
    echo "gemm $f $s rc=$? $(grep -o '"kernel": "[a-z_]*"\|"us": [0-9.]*\|"tflops": [0-9.]*\|"ratio": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm${f}_$s.jsonl" | tr '\n' ' ')"
  done
done
bench_flash main_mode --batches 1 --fp8-mma
bench_flash wide_mode --batches 1 --fp8-mma --fp8mma-wide-experts
grep -h prefill_profile "$OUT"/bench_*_mode.jsonl | cut -c1-420
ncu_kernel MmaWsExpertKernel 1 build-cuda/bin/bench_fp8_gemm --sample 0 --only expert_w1 --wide-experts
(cd "$OUT" && tar -cJf s58_c58b.tar.xz --exclude='*.tar.xz' . && find . -type f ! -name '*.tar.xz' -delete)
echo "total $(( $(date +%s) - t0 )) s"
