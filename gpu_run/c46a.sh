#!/usr/bin/env bash
# Prepared in session 45 (not run), carry [".devcarry"]. gpu_run/s45_tma_epilogue.diff: the dense
# TMA tile's epilogue for in-bounds tiles with one base address (c45c's ncu of wq_b: the general
# epilogue was 27% of the instructions, 17 a value). The same bits by construction (the same
# values to the same addresses). Main's bench_fp8_gemm and the mode's prefill first (built
# before the diff is applied), then the change: the FP8-linear bit tests, bench_fp8_gemm, the mode's prefill.
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm dsinfer
gemm main_all
bench_flash mainmma --batches 1 --fp8-mma
apply_diff s45_tma_epilogue.diff
gpu_build bench_fp8_gemm dsinfer gpu_fp8mma_test
fp8mma_tests
gemm epilogue
bench_flash epilogue --batches 1 --fp8-mma
grep -o '"attn_q_kv_proj_ms": [0-9.]*\|"attn_out_proj_ms": [0-9.]*\|"moe_shared+combine_ms": [0-9.]*' "$OUT"/bench_mainmma.jsonl "$OUT"/bench_epilogue.jsonl
echo "total $(( $(date +%s) - t0 )) s"
