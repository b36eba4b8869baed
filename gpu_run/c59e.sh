#!/usr/bin/env bash
# c59d at its smallest (little device time left): the experts' shapes with the 192 tile and with
# the split one (--split-experts), the 256-output samples' bits checked against the CPU.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm
for f in --split-experts ""; do
  for s in expert_w1 expert_w2; do
    o=$(timeout 40 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f 2>&1)
    echo "gemm $f $s rc=$? $(echo "$o" | grep -o '"us": [0-9.]*\|"ratio_to_bound": [0-9.]*\|"mismatches": [0-9]*\|"kernel": "[a-z_]*"' | tr '\n' ' ')"
    echo "$o" >> "$OUT/gemm_all.jsonl"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
