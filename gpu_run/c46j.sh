#!/usr/bin/env bash
# Session 46: the 128K prefill with and without QuarterSums' k-step template on one machine
# (c46g without: 4.525 s, indexer 170.9 ms; c46i with: 4.711 s, 192.7 ms; other machines).
source "$(dirname "$0")/common.sh"
p128() {
  timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 3 --prefill 131072 --prefill-chunk 8192 > "$OUT/bench_128k_$1.jsonl" 2>&1; echo "128k $1 rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"indexer_topk_ms": [0-9.]*' "$OUT/bench_128k_$1.jsonl" | tr '\n' ' '; echo
}
gpu_build bench_indexer dsinfer
p128 tmpl
apply_diff s46_indexer_notmpl.diff
gpu_build bench_indexer dsinfer
idx notmpl
p128 notmpl
echo "total $(( $(date +%s) - t0 )) s"
