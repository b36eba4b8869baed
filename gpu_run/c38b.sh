#!/usr/bin/env bash
# The FP8-instruction decision (session 38, no device; run after c38a.sh, then c38c.sh). Carry
# [".devcarry", "gpu_run"].
#  1. a cupti kernel timeline of graph-replayed batch-1 and batch-32 decode steps (the eager
#     profile overstates the graph's step; the last timeline is round 15's, at 1.35 ms);
#  2. probe_fp8_mma_bits: fact 4 (wgmma .e4m3 columns at N = 256 against N = 8) and fact 5 (the
#     wgmma model, bench/wgmma_fp8_model.h, against every element, with its variants);
#  3. bench_fp8_gemm: the dense / FP4 linear on the FP8 instructions at 8,192 tokens, sampled
#     outputs bit for bit against the model; bench_qgemm's figures for today's kernels beside it;
#  4. bench_fp8_gemv: the same chains at 1 and 8 tokens, every output against the model;
#     bench_qgemm --prequant's figures for today's decode kernels beside it.
source "$(dirname "$0")/common.sh"
gpu_build
B=build-cuda/bin/dsinfer
TR=build-cuda/libcupti_trace.so
g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include tools/cupti_trace/cupti_trace.cc \
  -L/usr/local/cuda/lib64 -lcupti -o $TR && for b in 1 32; do
  LD_PRELOAD=$TR DSINFER_TRACE_OUT=/tmp/trace_b$b.csv timeout 90 $B bench --preset flash-l8 --batches $b --prefill 0 --steps 3 --kv-cache-dtype fp8 > /dev/null 2>&1
  python3 tools/cupti_trace/timeline.py /tmp/trace_b$b.csv --chain > "$OUT/timeline_b$b.txt" 2>&1; echo "timeline b$b rc=$? $(( $(date +%s) - t0 )) s"
  head -28 "$OUT/timeline_b$b.txt"
done
timeout 120 build-cuda/bin/probe_fp8_mma_bits > "$OUT/probe_fp8.jsonl" 2>&1; echo "probe rc=$? $(( $(date +%s) - t0 )) s"
grep -E "n256_vs_n8|exact class|wgmma_vs_model" "$OUT/probe_fp8.jsonl"
# Session 38: the dense FP8 linear on the FP8 instructions (a first, untuned kernel), bit for bit
# against the wgmma model and timed at 8,192 tokens; today's kernels on the same shapes after it.
timeout 120 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm.jsonl" 2>&1; echo "bench_fp8_gemm rc=$? $(( $(date +%s) - t0 )) s"
grep -o '"shape": "[a-z_0-9]*"\|"us": [0-9.]*\|"tflops": [0-9.]*\|"model_mismatches": [0-9]*' "$OUT/fp8_gemm.jsonl" | paste - - - -; grep -m4 "vs model\|host_check" "$OUT/fp8_gemm.jsonl"
for sh in wq_a wq_b wkv idx_wq_b wo_b shared_w13 shared_w2 experts_w13 experts_w2; do timeout 30 build-cuda/bin/bench_qgemm --tokens 8192 --only $sh 2>&1 | grep '"qgemm"'; done > "$OUT/qgemm_8192.jsonl"
grep -o '"shape": "[a-z_0-9]*"\|"kernel": "[a-z_]*"\|"us": [0-9.]*\|"tflops": [0-9.]*' "$OUT/qgemm_8192.jsonl" | paste - - - -
# Session 38: the same linear at decode sizes (1 and 8 tokens, k slices as today's decode kernels),
# every output against the model; today's decode kernels on the same matrices after it.
timeout 90 build-cuda/bin/bench_fp8_gemv > "$OUT/fp8_gemv.jsonl" 2>&1; echo "bench_fp8_gemv rc=$? $(( $(date +%s) - t0 )) s"
grep -o '"shape": "[a-z_0-9]*"\|"tokens": [0-9]*\|"us": [0-9.]*\|"weight_gbps": [0-9]*\|"model_mismatches": [0-9]*' "$OUT/fp8_gemv.jsonl" | paste - - - - -; grep -m4 "vs model\|host_check" "$OUT/fp8_gemv.jsonl"
for m in 1 8; do for sh in wq_a wq_b wkv wo_b shared_w13 shared_w2 experts_w13 experts_w2; do timeout 30 build-cuda/bin/bench_qgemm --prequant --tokens $m --only $sh 2>&1 | grep '"qgemm"'; done; done > "$OUT/qgemm_decode.jsonl"
grep -o '"shape": "[a-z_0-9]*"\|"rows": [0-9]*\|"kernel": "[a-z_]*"\|"us": [0-9.]*\|"weight_gbps": [0-9]*' "$OUT/qgemm_decode.jsonl" | paste - - - - -
echo "total $(( $(date +%s) - t0 )) s"
