#!/usr/bin/env bash
# Session 58, first call (120 s on one H100; a record: it ran on a tree with the experiment's
# KernelOptions::fp8mma_experts_pipe, measured, rejected and deleted, docs/perf.md "Session 58"):
# the experts' pipelined consumers against main's serial ones on one card. Their bits
# (gpu_fp8mma_test with each form, which now runs ExpertsMatchCpuBitForBit at k = 2,048 for
# T = 150), bench_fp8_gemm's routed experts' shapes with each form (us, mismatches), and the
# mode's 8,192-token prefill with each form.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_fp8_gemm gpu_fp8mma_test
for p in serial promote convert; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test --fp8mma-experts-pipe=$p > "$OUT/fp8mma_test_$p.log" 2>&1; echo "gpu_fp8mma_test $p rc=$?"
  grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test_$p.log" | head -12
done
for p in serial promote convert; do
  f=""; [ $p != serial ] && f="--experts-pipe=$p"
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm_${p}_$s.jsonl" 2>&1
    echo "gemm $p $s rc=$? $(grep -o '"kernel": "[a-z_]*"\|"us": [0-9.]*\|"tflops": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_${p}_$s.jsonl" | tr '\n' ' ')"
  done
done
for p in serial promote convert; do
  bench_flash ${p}_mode --batches 1 --fp8-mma --fp8mma-experts-pipe $p
done
grep -h prefill_profile "$OUT"/bench_*_mode.jsonl | cut -c1-420
echo "total $(( $(date +%s) - t0 )) s"
