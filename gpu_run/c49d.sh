#!/usr/bin/env bash
# Session 49, carry [".devcarry"]; the tree is main. Three prepared changes, each the same bits:
# * s49_tma_block_products.diff: the dense TMA tile with the weights' 128-row block scales
#   (MmaTmaKernel<true>): a producer warp multiplies each stage's token scales by the block's
#   scale once, the consumers' promotion 64 FFMA a stage without the 64 FMUL (c49a's ncu of wo_b:
#   the tile issue-bound, the promotion 39% of its instructions).
# * s49_attn_row_pair_v2.diff: c49b's rounds of two chunks with the decode's packed-group offsets
#   in shared memory (c49b recomputed them per key, a division each: the decode 39% of the
#   instructions, c49a's ncu).
# * s49_tma_products_desc.diff: the products, and the consumers' wgmma descriptors as stage 0's
#   plus offsets (the same descriptors without WgmmaDescSw128's masks and shifts each step: about
#   15% of the consumers' instructions were uniform and descriptor arithmetic).
# Main first, then the first two diffs, then the third in place of the first: bench_fp8_gemm
# (every flash-l8 shape, 256 outputs checked), bench_attention; with the diffs, gpu_fp8mma_test (both expert kernels) and the row block's bit
# tests (both P V paths). No git stash / checkout; no GPU suite (device time).
source "$(dirname "$0")/common.sh"
gpu_build bench_fp8_gemm bench_attention gpu_fp8mma_test gpu_attention_tc_test
gemm main
attn4 main
apply_diff s49_tma_block_products.diff
apply_diff s49_attn_row_pair_v2.diff
gpu_build bench_fp8_gemm bench_attention gpu_fp8mma_test gpu_attention_tc_test
fp8mma_tests
for m in "" "--attention-row-pv=sync"; do timeout 100 build-cuda/bin/gpu_attention_tc_test $m > "$OUT/attn_tc_test$m.log" 2>&1; echo "gpu_attention_tc_test $m rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/attn_tc_test$m.log" | head -8; done
gemm products
attn4 pair2
git apply -R gpu_run/s49_tma_block_products.diff
apply_diff s49_tma_products_desc.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test
fp8mma_tests
gemm products_desc
git apply -R gpu_run/s49_tma_products_desc.diff
apply_diff s49_tma_block_products.diff
git apply -R gpu_run/s49_attn_row_pair_v2.diff
git apply -R gpu_run/s49_tma_block_products.diff
echo "total $(( $(date +%s) - t0 )) s"
