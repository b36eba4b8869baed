#!/usr/bin/env bash
# Session 42 (run on a tree with s41_hc_unfused.diff's CMake line, the CUDA sums as they were, and
# RoPE's explicit fmas), carry [".devcarry"]. The portability fix's second try: hyper_connection_sm90.cu built
# with -fmad=false (the CPU's hyper_connection.cc uncontracted; RoPE's explicit fmas on both sides);
# the goldens and the GPU suite. Then the experts' kernel profiled: bench_fp8_gemm (this card's
# baseline) and ncu of one warp-specialized FP4 w1 launch, with source-level stalls.
source "$(dirname "$0")/common.sh"
gpu_build
goldens
gpu_suite 300
grep -E "v41-E|tiny-fp8-cache|tiny-official" "$OUT/ctest.log" | sort | uniq | head
timeout 120 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm.txt" 2>&1; echo "bench_fp8_gemm rc=$?"; cat "$OUT/fp8_gemm.txt" | tail -14
timeout 200 ncu --clock-control none -k regex:MmaWsExpertKernel --launch-skip 2 --launch-count 1 --set full --import-source yes -o "$OUT/ws" build-cuda/bin/bench_fp8_gemm --only expert_w1 > "$OUT/ncu_run.log" 2>&1; echo "ncu rc=$? $(( $(date +%s) - t0 )) s"
[ -f "$OUT/ws.ncu-rep" ] && ncu -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1 && ncu -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_source.csv" 2>&1 && rm -f "$OUT/ws.ncu-rep" && xz -9 "$OUT/ws_source.csv"
tail -3 "$OUT/ncu_run.log"
echo "total $(( $(date +%s) - t0 )) s"
