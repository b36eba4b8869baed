#!/usr/bin/env bash
# Session 42, carry [".devcarry"]. The experts' producer slimmed (c42b's ncu: the producer warps
# issued as many instructions as the consumers, mostly 64-bit address maths reloaded from the
# parameter bank; the consumers waited on full stages): tokens copied 8 threads a row (coalesced),
# the tile's source rows in shared memory, the weights' row pointers once a slot; producer 56
# registers, consumers 224. Bits: the stages' bytes are unchanged (gpu_fp8mma_test), then the
# benches and a new ncu of the same launch.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm gpu_fp8mma_test dsinfer
fp8mma_tests
timeout 120 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm.txt" 2>&1; echo "bench_fp8_gemm rc=$?"; grep expert "$OUT/fp8_gemm.txt" | cut -c1-240
bench_flash mma --batches 1,32 --fp8-mma
timeout 200 ncu --clock-control none -k regex:MmaWsExpertKernel --launch-skip 2 --launch-count 1 --set full --import-source yes -o "$OUT/ws" build-cuda/bin/bench_fp8_gemm --only expert_w1 > "$OUT/ncu_run.log" 2>&1; echo "ncu rc=$? $(( $(date +%s) - t0 )) s"
[ -f "$OUT/ws.ncu-rep" ] && ncu -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1 && ncu -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_source.csv" 2>&1 && rm -f "$OUT/ws.ncu-rep" && xz -9 "$OUT/ws_source.csv"
echo "total $(( $(date +%s) - t0 )) s"
