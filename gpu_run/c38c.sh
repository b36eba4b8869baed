#!/usr/bin/env bash
# Prepared in session 37 (no device), split off c38b.sh in session 38: 1 / 2 / 4 expert-parallel
# ranks on the mid preset (logits over 1,024 ids in two chunks and 64 one-token chunks; md5 of
# each file), bench_indexer (first run), ncu of the mHC kernels at 8,192 tokens (bench_hc), and
# ncu of the batch-1 attention (split kernel and combine, source-level stalls). Carry
# [".devcarry", "gpu_run"].
source "$(dirname "$0")/common.sh"
gpu_build
B=build-cuda/bin/dsinfer
# Expert parallelism: mid preset (official formats), 1,024 ids in chunks of 512, then decode-like 1-token chunks.
$B init-model --preset mid --weights official --out /tmp/mid > /dev/null 2>&1 || echo "init-model failed"
python3 -c "import json; print(json.dumps({'ids': [(i*7919+11)%32000 for i in range(1024)]}))" > /tmp/ids.json
python3 -c "import json; print(json.dumps({'ids': [(i*7919+11)%32000 for i in range(64)]}))" > /tmp/ids64.json
for n in 1 2 4; do
  s=$(date +%s.%N); timeout 60 $B logits --device cuda --model /tmp/mid --ids-file /tmp/ids.json --chunks 512,512 --expert-parallel $n --out /tmp/l$n.npy > /dev/null 2> /tmp/e$n.log; rc=$?; e=$(date +%s.%N)
  s2=$(date +%s.%N); timeout 60 $B logits --device cuda --model /tmp/mid --ids-file /tmp/ids64.json --chunks $(python3 -c "print(','.join(['1']*64))") --expert-parallel $n --out /tmp/d$n.npy > /dev/null 2>> /tmp/e$n.log; rc2=$?; e2=$(date +%s.%N)
  echo "ep=$n prefill1024 rc=$rc $(python3 -c "print(round($e-$s,3))") s md5 $(md5sum < /tmp/l$n.npy | cut -c1-8); decode64 rc=$rc2 $(python3 -c "print(round($e2-$s2,3))") s md5 $(md5sum < /tmp/d$n.npy | cut -c1-8)"; tail -2 /tmp/e$n.log
done
NC="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats"
# (bench_hc launches the post once before its timings: the pre reads its partials.)
for kk in "mix HcMixKernel 0" "pre HcPreFinishSplitKernel 0" "post HcPostMixKernel 1" "post_moe HcPostMixKernel 1"; do
  set -- $kk
  timeout 60 $NC -k regex:"$2" --launch-skip $3 --launch-count 1 build-cuda/bin/bench_hc --tokens 8192 --kernels $1 >> "$OUT/ncu_hc.txt" 2>&1; echo "ncu $1 rc=$? $(( $(date +%s) - t0 )) s"
done
grep -E "^  [A-Za-z]|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issued Warp|No Eligible|Block Limit|Grid Size|Block Size" "$OUT/ncu_hc.txt" | head -80
timeout 60 build-cuda/bin/bench_indexer > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*\|"variant": "[a-z]*"\|"tensor_cores": [a-z]*\|"us": [0-9.]*\|"ratio_to_bound": [0-9.]*' "$OUT/indexer.jsonl" | paste - - - - -
# The attention at decode batch 1 (session 37's reading of the profiles: 24-36 us a layer against a
# 0.1-0.2 us memory bound, 0.216 of the step's 2.357 eager ms): the split kernel and its combine,
# CSA, with source-level stalls.
BA=build-cuda/bin/bench_attention
timeout 30 $BA --rows 1 --prefill 0 --variants tc_packed_qp > "$OUT/attn_rows1.jsonl" 2>&1
grep -o '"kind": "[a-z]*"\|"split": [a-z]*\|"us": [0-9.]*' "$OUT/attn_rows1.jsonl" | paste - - -
timeout 120 ncu --clock-control none --set full --import-source yes -k regex:SparseAttentionTc --launch-skip 2 --launch-count 2 -o "$OUT/attn1" $BA --rows 1 --prefill 0 --kinds csa --variants tc_packed_qp > "$OUT/ncu_attn1.log" 2>&1; echo "ncu attn rc=$?"
if [ -f "$OUT/attn1.ncu-rep" ]; then
  ncu -i "$OUT/attn1.ncu-rep" --page details > "$OUT/attn1_details.txt" 2>&1
  ncu -i "$OUT/attn1.ncu-rep" --page source --csv --print-source sass > "$OUT/attn1_source.csv" 2>&1
  rm -f "$OUT/attn1.ncu-rep"
  grep -E "SparseAttention|Duration|Registers Per|Achieved Occupancy|Grid Size|No Eligible" "$OUT/attn1_details.txt" | head -20
fi
echo "total $(( $(date +%s) - t0 )) s"
