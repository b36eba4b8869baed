#!/usr/bin/env bash
# Session 46, carry [".devcarry"]: the review's doubt alone (c47a has it too): decode-like batches
# of 512 / 1,024 sequences take the runs kernel; 16 rows a block (main) against 4.
source "$(dirname "$0")/common.sh"
dec() {  # name
  timeout 60 build-cuda/bin/bench_indexer --rows 512,1024 --variants tc,tc_rows > "$OUT/indexer_dec_$1.jsonl" 2>&1; echo "bench_indexer decode rows $1 rc=$?"
  grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer_dec_$1.jsonl" | paste -d" " - -
}
gpu_build bench_indexer
dec main
apply_diff s46_indexer_rows4.diff
gpu_build bench_indexer
dec rows4
echo "total $(( $(date +%s) - t0 )) s"
