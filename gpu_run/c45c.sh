#!/usr/bin/env bash
# Session 45, carry [".devcarry"]: main's current figures on one card (after the RoPE table and
# the indexer runs landed): flash-l8's decode and 8,192-token prefill by default and in the
# --fp8-mma mode, then the 32,768- and 131,072-token prefills in chunks of 8,192 (the mode's
# first), as time allows, each with its last chunk's eager profile (bench_command.cc, new).
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
B="build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8"
timeout 200 $B --batches 1,32,128,256 --steps 10 --prefill 8192 > "$OUT/bench_default.jsonl" 2>&1; echo "default rc=$? $(( $(date +%s) - t0 )) s"
timeout 150 $B --batches 1,32,128,256 --steps 10 --prefill 8192 --fp8-mma > "$OUT/bench_mma.jsonl" 2>&1; echo "mma rc=$? $(( $(date +%s) - t0 )) s"
for n in default mma; do
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"ratio[a-z_]*": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
done
long() {  # name, tokens, flags...
  local n=$1 len=$2; shift 2
  [ $(( $(date +%s) - t0 )) -lt 500 ] || { echo "$n skipped (time)"; return; }
  timeout 100 $B --batches 1 --steps 3 --prefill "$len" --prefill-chunk 8192 "$@" > "$OUT/bench_$n.jsonl" 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"device_[a-z_]*": [0-9.]*\|"ratio_to_bound": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
  grep '"prefill_profile_eager"' "$OUT/bench_$n.jsonl" | head -c 900; echo
}
long mma_32k 32768 --fp8-mma
long mma_128k 131072 --fp8-mma
long default_128k 131072
long default_32k 32768
# The dense TMA tile on its shortest-k shape (wq_b: k 1,024, 1.07 GB of fp32 output): where its
# 1,007 us (H100) go against the 335 us its bytes need.
if [ $(( $(date +%s) - t0 )) -lt 480 ]; then
  gpu_build bench_fp8_gemm
  ncu_kernel MmaTmaKernel 0 build-cuda/bin/bench_fp8_gemm --only wq_b --sample 0
fi
echo "total $(( $(date +%s) - t0 )) s"
