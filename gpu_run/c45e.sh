#!/usr/bin/env bash
# Session 45, carry [".devcarry"]; the tree carries the index keys' table decode (c45d's ncu: the
# key decode was 39% of IndexerScoreTcRunKernel's instructions). The indexer's bit tests (the
# head_dim-128 case now with scale bytes 1, ~57 and ~194), bench_indexer against c45a's H100 figure
# (2163.9 us at the 8,192-token prefill), the mode's 32,768-token prefill against c45c's (0.836 s).
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer gpu_v41_ops_test dsinfer
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -12
timeout 60 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer.jsonl" | paste -d" " - -
timeout 60 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 3 --prefill 32768 --prefill-chunk 8192 > "$OUT/bench_mma_32k.jsonl" 2>&1; echo "mma 32k rc=$?"
grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"indexer_topk_ms": [0-9.]*\|"total_ms": [0-9.]*' "$OUT/bench_mma_32k.jsonl" | tr '\n' ' '; echo
echo "total $(( $(date +%s) - t0 )) s"
