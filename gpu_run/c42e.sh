#!/usr/bin/env bash
# Session 42, carry [".devcarry"]. c42c's slimmer experts' producer plus AlignSmem1024: the 1024-byte
# alignment of dynamic shared memory by pointer arithmetic, so the WS experts' and the TMA tile's
# stage reads compile to ld.shared (they were generic loads: c42c's ncu showed the Promote's FMULs
# waiting on the long scoreboard); the same helper in qgemm_ws, bf16_tc_wg and the row attention.
# Bits unchanged by construction: the op tests, the benches (default and mode), the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
timeout 120 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm.txt" 2>&1; echo "bench_fp8_gemm rc=$?"; grep '"fp8_gemm"' "$OUT/fp8_gemm.txt" | cut -c30-60,150-240
bench_flash def --batches 1,32,128,256
bench_flash mma --batches 1,32,128,256 --fp8-mma
gpu_suite 300
echo "total $(( $(date +%s) - t0 )) s"
