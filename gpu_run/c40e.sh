#!/usr/bin/env bash
# Session 40, last device call (lean: ~400 s of budget left). Carry [".devcarry"]. The mode's
# routed experts at prefill: the gather tile (default) against the warp-specialized gather tile
# with a producer warpgroup (--fp8mma-ws-experts); the op tests both ways.
source "$(dirname "$0")/common.sh"
gpu_build gpu_fp8mma_test dsinfer
timeout 40 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test.log" 2>&1; echo "gpu_fp8mma_test rc=$?"
timeout 40 build-cuda/bin/gpu_fp8mma_test --fp8mma-ws-experts > "$OUT/fp8mma_test_ws.log" 2>&1; echo "gpu_fp8mma_test ws rc=$?"
grep -hE "FAILED|Failure" "$OUT"/fp8mma_test*.log | head -8
for m in "" "--fp8mma-ws-experts"; do
  timeout 45 build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1 --steps 3 --prefill 8192 --kv-cache-dtype fp8 --fp8-mma $m > "$OUT/bench$m.jsonl" 2>&1; echo "bench $m rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"moe_routed_experts_ms": [0-9.]*\|"attn_out_proj_ms": [0-9.]*' "$OUT/bench$m.jsonl" | tr '\n' ' '; echo
done
echo "total $(( $(date +%s) - t0 )) s"
