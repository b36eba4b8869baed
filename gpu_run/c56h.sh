#!/usr/bin/env bash
# Session 56: ncu (full set, source samples) of the TMA-fed routed experts' tile on expert_w1
# (bench_fp8_gemm's 8,192 tokens), main: what binds it now.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm
ncu_kernel MmaWsExpertKernel 0 build-cuda/bin/bench_fp8_gemm --only expert_w1 --sample 0
grep -E "Throughput|Pipe|Eligible|Active Warps|Registers|Stall|Warp Cycles|Occupancy" "$OUT/MmaWsExpertKernel_details.txt" | head -40
echo "total $(( $(date +%s) - t0 )) s"
