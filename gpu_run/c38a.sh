#!/usr/bin/env bash
# Prepared in session 37 (no device was lent), for the next device time. Carry [".devcarry", "gpu_run"]
# (.devcarry/deps.tar.xz: scripts/stage_gpu_deps.sh, then tar -cJf .devcarry/deps.tar.xz .deps).
#  1. main as it is: build, bench_hc (the mHC kernels against their memory bound; first run).
#  2. gpu_run/s37_hc_post_pairs.diff applied (the post's mix weights as one float4 an output and
#     column, tokens in pairs sharing them; the same operations per element, so the same bits),
#     and gpu_run/s37_hc_pre_occupancy.diff (the split pre finish at 4 blocks an SM, 64 registers:
#     ptxas spills 4 bytes; the same bits); bench_hc attributes each to its kernel:
#     rebuild, bench_hc again, the whole GPU suite on it (also the session-36 review mends'
#     assertions, which have not run yet: gpu_expert_parallel_test).
#     Also gpu_run/s38_bf16_few_prefetch.diff (session 38, no device): the bf16 tensor-core
#     linear's few-row tile (the head, the compressors, the router's gate and the indexer's
#     projections at decode) issues its first weight stages before the launch's wait and loads the
#     tokens' B fragments a step ahead (the same mma chain, so the same bits; ptxas 80 -> 106
#     registers, no spills; still one block an SM, by shared memory). Prediction, written before
#     any run: bench_qgemm head at 1 token ~300 -> 250-265 us, the compressors' and the gate's
#     few-row launches 1-3 us faster each, decode batch 1 -0.04 to -0.08 ms.
#  3. the model bench, main then the patched tree (before the suite: the suite takes what time is
#     left of the call's 600 s).
source "$(dirname "$0")/common.sh"
gpu_build
mkdir -p /tmp/base && cp build-cuda/bin/dsinfer build-cuda/bin/bench_hc build-cuda/bin/bench_qgemm /tmp/base/
timeout 60 /tmp/base/bench_hc > "$OUT/hc_main.jsonl" 2>&1; echo "bench_hc main rc=$?"
for d in gpu_run/s37_hc_post_pairs.diff gpu_run/s37_hc_pre_occupancy.diff gpu_run/s38_bf16_few_prefetch.diff; do
  { patch -p1 < $d || git apply $d; } > /dev/null 2>&1 || { echo "patch $d failed"; exit 1; }
done
gpu_build
timeout 60 build-cuda/bin/bench_hc > "$OUT/hc_patched.jsonl" 2>&1; echo "bench_hc patched rc=$?"
python3 - "$OUT/hc_main.jsonl" "$OUT/hc_patched.jsonl" <<'PY'
import json, sys
rows = {}
for tag, f in zip(("main", "patched"), sys.argv[1:]):
    for l in open(f):
        if l.startswith('{"bench": "hc"'):
            d = json.loads(l); rows.setdefault((d["kernel"], d["tokens"]), {})[tag] = (d["us"], d["ratio_to_bound"])
for k, v in sorted(rows.items()):
    print(k, v)
PY
# The bf16 few-row tile at 1 token (graph replay), main against patched.
for tag in main patched; do
  bq=build-cuda/bin/bench_qgemm; [ $tag = main ] && bq=/tmp/base/bench_qgemm
  for shape in head csa_compressor index_compressor router_gate; do
    timeout 30 $bq --only $shape --tokens 1 2>&1 | grep '"qgemm"' | sed "s/^/$tag /" >> "$OUT/qgemm_few.txt"
  done
done
grep -o '^[a-z]* \|"shape": "[a-z_0-9]*"\|"rows": [0-9]*\|"kernel": "[a-z_0-9]*"\|"us": [0-9.]*\|"weight_gbps": [0-9]*' "$OUT/qgemm_few.txt" | paste -d' ' - - - - - - | head -20
BA="bench --preset flash-l8 --batches 1 --steps 10 --prefill 8192 --kv-cache-dtype fp8"
for tag in main patched; do
  bin=build-cuda/bin/dsinfer; [ $tag = main ] && bin=/tmp/base/dsinfer
  timeout 100 $bin $BA > "$OUT/bench_$tag.jsonl" 2>&1; echo "bench $tag rc=$?"
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"hc_pre+norm_ms": [0-9.]*\|"hc_post_ms": [0-9.]*' "$OUT/bench_$tag.jsonl" | tr '\n' ' '; echo
done
left=$(( 585 - ($(date +%s) - t0) )); echo "ctest gets ${left} s"
timeout $left ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j4 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" "$OUT/ctest.log" | head -12
echo "total $(( $(date +%s) - t0 )) s"
