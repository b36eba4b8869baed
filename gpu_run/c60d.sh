#!/usr/bin/env bash
# Prepared in session 60 (about 2.5 minutes; after c60a on the same machine, whose bench_flash
# "mode" is main's figure): the indexer's query rounding in a warp form
# (gpu_run/s60_index_round_warp.diff: a head in a warp's registers, the Hadamard's stages by
# shuffles, no block barriers, the RoPE table once per token; the block form kept for the shapes
# it does not take and as IndexQueryRoundParams::form -1). Session 56's trace had the block form
# at about 383 us a launch at 8,192 tokens, against about 0.18 ms of bytes. In order: the new op
# test (the warp form's bits equal to the block form's at every shape and grouping), the old
# round test against the CPU, bench_indexer's new index_query_round lines (both forms, decode rows
# and the 8,192-token prefill), the mode's prefill and decode with it.
source "$(dirname "$0")/common.sh"
apply_diff s60_index_round_warp.diff
gpu_build gpu_v41_ops_test bench_indexer dsinfer
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8CacheTest.*' > "$OUT/v41_ops_round.log" 2>&1; echo "gpu_v41_ops_test V4Fp8CacheTest rc=$?"
grep -E "OK \]|FAILED|Failure" -A3 "$OUT/v41_ops_round.log" | head -20
timeout 90 build-cuda/bin/bench_indexer --rows 1,32,256 --prefill 8192 --variants tc > "$OUT/indexer_round.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep '"index_query_round"\|"indexer"' "$OUT/indexer_round.jsonl" | grep -o '"bench": "[a-z_]*", "rows": [0-9]*\|"form": "[a-z]*"\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*' | paste -sd' ' | sed 's/"bench"/\n"bench"/g'; echo
bench_flash mode_round --batches 1,32 --fp8-mma
bench_flash default_round --batches 1,32
echo "total $(( $(date +%s) - t0 )) s"
