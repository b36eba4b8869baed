#!/usr/bin/env bash
# Session 50, carry [".devcarry"]; the tree is main. Where batch 1's decode step goes now, and
# where the row attention's instructions go by source line:
# * the FP8 cache's batch-1 step (graph) timed, then one graph-replayed step under ncu, each
#   kernel's device time alone (scripts/profile_decode_step.sh's method with --kv-cache-dtype fp8);
# * the row kernel at a SWA layer's 8,192-token prefill under ncu (full set), its samples and
#   instruction counts exported per CUDA source line as well as per SASS line.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_attention
timeout 120 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --batches 1 --prefill 0 --steps 20 > "$OUT/bench_b1.jsonl" 2>&1; echo "bench b1 rc=$?"
grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*' "$OUT/bench_b1.jsonl"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
timeout 200 "$ncu_bin" --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --batches 1 --prefill 0 --steps 1 --profile-step \
  > "$OUT/ncu_step_b1.csv" 2> "$OUT/ncu_step_b1.err"; echo "ncu step rc=$? $(( $(date +%s) - t0 )) s"
python3 tools/ncu_summary.py "$OUT/ncu_step_b1.csv" > "$OUT/ncu_step_b1.txt"; head -45 "$OUT/ncu_step_b1.txt"
xz -9 "$OUT/ncu_step_b1.csv"
k=SparseAttentionTcRowKernel
timeout 200 ncu --clock-control none -k regex:$k --launch-count 1 --set full --import-source yes -o "$OUT/$k" \
  build-cuda/bin/bench_attention --rows 1 --prefill 8192 --kinds swa --variants tc_packed_qp > "$OUT/ncu_$k.log" 2>&1; echo "ncu $k rc=$? $(( $(date +%s) - t0 )) s"
ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source cuda > "$OUT/${k}_cuda.csv" 2>&1
ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source sass > "$OUT/${k}_source.csv" 2>&1
ncu -i "$OUT/$k.ncu-rep" --page details > "$OUT/${k}_details.txt" 2>&1
rm -f "$OUT/$k.ncu-rep"; xz -9 "$OUT/${k}_cuda.csv" "$OUT/${k}_source.csv"
grep -E "Duration|Issue Slots Busy|No Eligible" "$OUT/${k}_details.txt" | head -4
ls -la "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
