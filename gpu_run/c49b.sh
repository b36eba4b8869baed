#!/usr/bin/env bash
# A record of what ran (session 49): its diff was measured, rejected and deleted; figures in
# docs/perf.md "Session 49".
# Session 49, carry [".devcarry"]; the tree is main. The row attention in rounds of two chunks
# (s49_attn_row_pair.diff): a round's 64 keys decoded together, warpgroups 2c / 2c + 1 run chunk
# c's S (both chains of a dim half, summed in registers as the softmax summed them), each warp's
# softmax over both chunks writes P's bf16 fragments straight into pf, P V folds chunk 0 then 1:
# four block barriers a round instead of five a chunk, the same operations per chunk (ptxas: 128 /
# 124 registers, no spill). Main first, then the diff: bench_attention (rows 1 / 32 / 128 / 256,
# the 8,192-token prefill), the model (the default's decode at 128 / 256 and prefill, the mode's
# prefill); with the diff, the row block's bit tests on both P V paths and the GPU suite. No git
# stash / checkout.
source "$(dirname "$0")/common.sh"
gpu_build bench_attention dsinfer
attn4 main
bench_flash main_default --batches 128,256
bench_flash main_mma --batches 1 --fp8-mma
apply_diff s49_attn_row_pair.diff
gpu_build
timeout 200 ctest --test-dir build-cuda -R "gpu_attention_tc" --timeout 150 --output-on-failure > "$OUT/attn_tc_test.log" 2>&1; echo "attention tc tests rc=$?"; grep -E "tests passed|tests failed|Failure|FAILED" "$OUT/attn_tc_test.log" | head -12
attn4 pair
bench_flash pair_default --batches 128,256
bench_flash pair_mma --batches 1 --fp8-mma
gpu_suite 240
git apply -R gpu_run/s49_attn_row_pair.diff
echo "total $(( $(date +%s) - t0 )) s"
