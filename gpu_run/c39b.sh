#!/usr/bin/env bash
# Session 39. Carry [".devcarry"]. bench_fp8_gemm's second form (TMA, warp-specialized, both
# operands from shared memory) against its first form and today's kernels on the same shapes;
# then main with the mHC pre's occupancy change (c9ca9e6): the GPU suite and the model bench
# (batch 1, the 8K prefill); an ncu profile of the second form if time is left.
source "$(dirname "$0")/common.sh"
g++ --version | head -1; ldd --version | head -1; grep -m1 "model name" /proc/cpuinfo
gpu_build
timeout 150 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm_tma.jsonl" 2>&1; echo "bench_fp8_gemm rc=$? $(( $(date +%s) - t0 )) s"
timeout 40 build-cuda/bin/bench_fp8_gemm --kernel first --only wq_b 2>&1 | grep '"fp8_gemm"' > "$OUT/fp8_gemm_first.jsonl"
for sh in wq_a wq_b wkv idx_wq_b wo_b shared_w13 shared_w2; do timeout 30 build-cuda/bin/bench_qgemm --tokens 8192 --only $sh 2>&1 | grep '"qgemm"'; done > "$OUT/qgemm_8192.jsonl"
cat "$OUT/fp8_gemm_tma.jsonl" "$OUT/fp8_gemm_first.jsonl" | grep -o '"shape": "[a-z_0-9]*"\|"kernel": "[a-z]*"\|"us": [0-9.]*\|"tflops": [0-9.]*\|"model_mismatches": [0-9]*' | paste - - - - -
grep -m6 "vs model\|host_check\|refused\|error" "$OUT/fp8_gemm_tma.jsonl"
grep -o '"shape": "[a-z_0-9]*"\|"kernel": "[a-z_]*"\|"us": [0-9.]*\|"tflops": [0-9.]*' "$OUT/qgemm_8192.jsonl" | paste - - - -
echo "benches done $(( $(date +%s) - t0 )) s"
timeout 150 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 120 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*" "$OUT/ctest.log" | head -12
timeout 60 build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1 --steps 10 --prefill 8192 --kv-cache-dtype fp8 > "$OUT/bench_model.jsonl" 2>&1; echo "bench rc=$?"
grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"hc_pre+norm_ms": [0-9.]*\|"hc_post_ms": [0-9.]*' "$OUT/bench_model.jsonl" | tr '\n' ' '; echo
timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats -k regex:Fp8GemmTma --launch-count 1 build-cuda/bin/bench_fp8_gemm --only wq_b --sample 64 > "$OUT/ncu_tma.txt" 2>&1; echo "ncu rc=$?"
grep -E "Duration|Throughput|Issued Warp|No Eligible|Hit Rate" "$OUT/ncu_tma.txt" | head -16
echo "total $(( $(date +%s) - t0 )) s"
