#!/usr/bin/env bash
# Next session (branch exp/attention-row-next, on top of main's session-33 tree): the whole GPU
# suite (session 33's last commits were compiled only), the row block (8-byte raw copies; S's wgmma
# chain unrolled by a head_dim template: ptxas serialized it, C7520) against
# session 33's figures (CSA 8,192 rows 9,145 us, 256 rows 335), ncu with source-level stalls.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
[ -d .deps ] || tar -xJf .devcarry/deps.tar.xz
cmake --preset cuda-release -DCMAKE_CUDA_FLAGS=-lineinfo > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build --preset cuda-release -j16 > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "== build ok $(( $(date +%s) - t0 )) s"; rm -f "$OUT/build.log" "$OUT/configure.log"
timeout 420 ctest --test-dir build-cuda -L gpu --timeout 200 -j2 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"
grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" "$OUT/ctest.log" | head -12
BA=build-cuda/bin/bench_attention
timeout 60 $BA --rows 128,256 --prefill 8192 --variants tc_row_packed_qp | grep -o '"kind": "[a-z]*"\|"rows": [0-9]*\|"us": [0-9.]*' | paste - - - 
timeout 150 ncu --clock-control none -k regex:SparseAttentionTcRowKernel --launch-skip 2 --launch-count 1 --set full --import-source yes -o "$OUT/row" $BA --rows 8192 --prefill 0 --kinds csa --variants tc_row_packed_qp > "$OUT/ncu_run.log" 2>&1; echo "ncu rc=$?"
[ -f "$OUT/row.ncu-rep" ] && ncu -i "$OUT/row.ncu-rep" --page source --csv --print-source sass > "$OUT/row_source.csv" 2>&1 && rm -f "$OUT/row.ncu-rep"
echo "total $(( $(date +%s) - t0 )) s"
