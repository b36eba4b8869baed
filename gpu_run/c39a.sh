#!/usr/bin/env bash
# Session 39. Carry [".devcarry"]. c38a.sh's suite (three patches applied) failed 16 of 118: the
# V4.1 model / engine tests and the gpu_model_* schedules. Which change: the failing tests on main,
# then with each patch alone (output kept). Then bench_fp8_gemm's FP4 expert shapes (missing from
# its list in c38b) and an ncu profile of its FP8 kernel (why 270 TFLOP/s against 1,979).
source "$(dirname "$0")/common.sh"
gpu_build
R="V41|^gpu_model_qgemm$|^gpu_model_row_block$"
timeout 150 ctest --test-dir build-cuda -R "$R" --output-on-failure -j6 --timeout 100 > "$OUT/t_main.log" 2>&1
echo "main: $(grep -E 'tests passed' $OUT/t_main.log) $(( $(date +%s) - t0 )) s"
for d in s37_hc_post_pairs s37_hc_pre_occupancy s38_bf16_few_prefetch; do
  git apply gpu_run/$d.diff || { echo "apply $d failed"; continue; }
  gpu_build
  timeout 150 ctest --test-dir build-cuda -R "$R" --output-on-failure -j6 --timeout 100 > "$OUT/t_$d.log" 2>&1
  echo "$d: $(grep -E 'tests passed' $OUT/t_$d.log) $(( $(date +%s) - t0 )) s"
  git apply -R gpu_run/$d.diff
done
grep -m12 -E "Failure|Expected|Which is|error|mismatch|differ|rows apart" "$OUT/t_main.log"
gpu_build
for s in expert_w13 expert_w2; do timeout 60 build-cuda/bin/bench_fp8_gemm --only $s 2>&1 | grep -v setup; done
timeout 120 ncu --clock-control none --set full --import-source yes -k regex:Fp8GemmKernel --launch-count 1 -o "$OUT/g" build-cuda/bin/bench_fp8_gemm --only wq_b > "$OUT/ncu_g.log" 2>&1; echo "ncu rc=$?"
if [ -f "$OUT/g.ncu-rep" ]; then
  ncu -i "$OUT/g.ncu-rep" --page details > "$OUT/g_details.txt" 2>&1
  ncu -i "$OUT/g.ncu-rep" --page source --csv --print-source sass > "$OUT/g_source.csv" 2>&1
  rm -f "$OUT/g.ncu-rep"
  grep -E "Duration|Registers Per|Achieved Occupancy|No Eligible|Issued Warp|Compute \(SM\)|Memory Throughput|L2 Cache Throughput|Bank Conflicts|Stall" "$OUT/g_details.txt" | head -30
fi
echo "total $(( $(date +%s) - t0 )) s"
