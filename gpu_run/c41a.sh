#!/usr/bin/env bash
# Session 41, first call. Carry [".devcarry"]. Everything built; the mode's op tests (the
# experts' last token tiles now on narrower wgmma: N 32 / 64 / 96) both expert kernels; the GPU
# suite (session 40's review mends never ran on a GPU); flash-l8 with and without --fp8-mma, and
# the mode's gather experts as the control against session 40's figures (same kind of card).
source "$(dirname "$0")/common.sh"
gpu_build
for m in "" "--no-fp8mma-ws-experts"; do
  timeout 60 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "FAILED|Failure" "$OUT/fp8mma_test$m.log" | head -8
done
bm() {  # name, flags...
  local n=$1; shift
  timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --steps 10 --prefill 8192 --kv-cache-dtype fp8 "$@" > "$OUT/bench_$n.jsonl" 2>&1; echo "bench $n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"moe_routed_experts_ms": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
  grep -iE "error|abort|fail" "$OUT/bench_$n.jsonl" | head -3
}
bm mma --batches 1,32,128,256 --fp8-mma
bm mma_gather --batches 1 --fp8-mma --no-fp8mma-ws-experts
bm default --batches 1,32,128,256
timeout 330 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | head -16
echo "total $(( $(date +%s) - t0 )) s"
