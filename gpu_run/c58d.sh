#!/usr/bin/env bash
# Session 58, fourth call (about 3 minutes; an H200 asked for: the goals' card, whose figures are
# still session 52's): main's figures, flash-l8 with the FP8 cache by default (decode batches 1 /
# 32 / 128 / 256, the 8,192-token prefill) and in the mode (batch 1, the prefill).
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash main_default --batches 1,32,128,256
bench_flash main_mode --batches 1 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_default.jsonl" "$OUT/bench_main_mode.jsonl" | cut -c1-420
echo "total $(( $(date +%s) - t0 )) s"
