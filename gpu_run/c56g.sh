#!/usr/bin/env bash
# Session 56, the closing figures of main (one card): flash-l8 with the FP8 cache by default and
# in the mode (--fp8-mma), decode batches 1 / 32 / 128 / 256 and the 8,192-token prefill; the
# mode's 32,768-token prefill in chunks of 8,192.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash final_default --batches 1,32,128,256
bench_flash final_mode --batches 1,32,128,256 --fp8-mma
long32k final
grep -h prefill_profile "$OUT/bench_final_default.jsonl" "$OUT/bench_final_mode.jsonl" | cut -c1-420
grep -h '"bench": "prefill"' "$OUT/bench_final_default.jsonl" "$OUT/bench_final_mode.jsonl" "$OUT/bench_32k_final.jsonl" | cut -c1-300
echo "total $(( $(date +%s) - t0 )) s"
