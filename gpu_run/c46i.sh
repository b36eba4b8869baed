#!/usr/bin/env bash
# Session 46, carry [".devcarry"]: what lands (16 rows a block, 3 blocks an SM, the k-step template
# kept; c46f measured it at 1061.3 us): the indexer's bit tests, bench_indexer, the mode's 32K and
# 128K prefills. (No git commands: the device's checkout has an older HEAD than this tree.)
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer gpu_v41_ops_test
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -8
idx final
long32k final
timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 3 --prefill 131072 --prefill-chunk 8192 > "$OUT/bench_128k.jsonl" 2>&1; echo "128k rc=$? $(( $(date +%s) - t0 )) s"
grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"indexer_topk_ms": [0-9.]*\|"total_ms": [0-9.]*' "$OUT/bench_128k.jsonl" | tr '\n' ' '; echo
echo "total $(( $(date +%s) - t0 )) s"
