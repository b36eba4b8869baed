#!/usr/bin/env bash
# Session 41, third call. Carry [".devcarry"]. The mode's FP4 experts on the warp-specialized
# tile: each consumer warpgroup turns its 64 weight rows' e2m1 codes into e4m3 in shared memory
# (128-byte swizzle), then each group's step takes both operands from shared memory (was: A from
# registers). Op tests both expert kernels; flash-l8's prefill in the mode (c41a: experts 113.5
# ms); ncu of one warp-specialized experts launch with source-level stalls.
source "$(dirname "$0")/common.sh"
gpu_build gpu_fp8mma_test dsinfer
fp8mma_tests
bench_flash mma --batches 1 --fp8-mma
timeout 150 ncu --clock-control none -k regex:MmaWsExpertKernel --launch-skip 4 --launch-count 1 --set full --import-source yes -o "$OUT/ws" build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1 --steps 1 --prefill 8192 --kv-cache-dtype fp8 --fp8-mma > "$OUT/ncu_run.log" 2>&1; echo "ncu rc=$? $(( $(date +%s) - t0 )) s"
[ -f "$OUT/ws.ncu-rep" ] && ncu -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1 && ncu -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_source.csv" 2>&1 && rm -f "$OUT/ws.ncu-rep"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Executed Ipc|Issue Slots Busy|Block Size|Grid Size" "$OUT/ws_details.txt" | head -14
echo "total $(( $(date +%s) - t0 )) s"
