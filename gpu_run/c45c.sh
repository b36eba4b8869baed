#!/usr/bin/env bash
# Session 45, carry [".devcarry"]: main's current figures on one card (after the RoPE table and
# the indexer runs landed): flash-l8's decode and 8,192-token prefill by default and in the
# --fp8-mma mode, then the mode's 32,768-token prefill in chunks of 8,192.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
B="build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8"
timeout 200 $B --batches 1,32,128,256 --steps 10 --prefill 8192 > "$OUT/bench_default.jsonl" 2>&1; echo "default rc=$? $(( $(date +%s) - t0 )) s"
timeout 150 $B --batches 1,32,128,256 --steps 10 --prefill 8192 --fp8-mma > "$OUT/bench_mma.jsonl" 2>&1; echo "mma rc=$? $(( $(date +%s) - t0 )) s"
for n in default mma; do
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"ratio[a-z_]*": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
done
[ $(( $(date +%s) - t0 )) -lt 420 ] && { timeout 150 $B --batches 1 --steps 3 --prefill 32768 --prefill-chunk 8192 --fp8-mma > "$OUT/bench_mma_32k.jsonl" 2>&1; echo "mma 32k rc=$? $(( $(date +%s) - t0 )) s"; grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"device_mem[a-z_]*": [0-9.]*' "$OUT/bench_mma_32k.jsonl" | tr '\n' ' '; echo; }
echo "total $(( $(date +%s) - t0 )) s"
