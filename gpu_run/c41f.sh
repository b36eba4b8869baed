#!/usr/bin/env bash
# Session 41, last call (lean: ~490 s of budget left). Carry [".devcarry"]. bench_fp8_gemm now
# times src's mode kernels (LaunchLinear / LaunchExpertLinear with WeightRef::mma) on flash-l8's
# dense FP8 shapes and routed FP4 experts at 8,192 tokens, each checked against the CPU reference.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm
timeout 150 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm_src.jsonl" 2>&1; echo "bench_fp8_gemm rc=$? $(( $(date +%s) - t0 )) s"
cat "$OUT/fp8_gemm_src.jsonl" | cut -c1-400
echo "total $(( $(date +%s) - t0 )) s"
