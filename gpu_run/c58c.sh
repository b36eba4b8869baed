#!/usr/bin/env bash
# Session 58, third call (about 8 minutes; an H200 asked first): main with the wide experts' tile
# as the default. The GPU suite (gpu_fp8mma_narrow_experts runs the 128-token tile), then main's
# figures: flash-l8 with the FP8 cache by default (decode batches 1 / 32 / 128 / 256, the
# 8,192-token prefill) and in the mode (batch 1, the prefill, 32,768 tokens in chunks of 8,192).
source "$(dirname "$0")/common.sh"
gpu_build
gpu_suite 280
bench_flash main_default --batches 1,32,128,256
bench_flash main_mode --batches 1 --fp8-mma
long32k main
grep -h prefill_profile "$OUT/bench_main_default.jsonl" "$OUT/bench_main_mode.jsonl" | cut -c1-420
echo "total $(( $(date +%s) - t0 )) s"
