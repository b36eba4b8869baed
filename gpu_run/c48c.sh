#!/usr/bin/env bash
# Session 48, carry [".devcarry"]; the tree is main, the script applies the diff itself.
# s48_hc_pre_once.diff as c48b ran it, plus decode sizes (up to kHcOwnSinkhornMaxRows = 64 rows)
# keeping the Sinkhorn in a cluster of its own (c48b: the Sinkhorn after the collapse cost 1.5 us
# at 1 and 32 tokens). bench_hc's pre at 1 / 16 / 32 / 64 / 128 / 256 / 8,192 tokens: main, the
# shared form at every size (threshold 0), the own-cluster form at every size (threshold 2^30),
# and the diff as it is; out_hash must be main's for all three. Then the HcTest op tests and the
# model's figures, main and the diff on this machine: the mode's prefill and batch 1, the
# default's batch 1 / 128 / 256 and prefill. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
hc() {  # name
  timeout 60 build-cuda/bin/bench_hc --kernels pre --tokens 1,16,32,64,128,256,8192 > "$OUT/hc_$1.jsonl" 2>&1; echo "bench_hc $1 rc=$?"
  grep -o '"tokens": [0-9]*, "us": [0-9.]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  diff <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_main.jsonl") <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_$1.jsonl") > /dev/null && echo "$1 out_hash: main's bits" || echo "$1 out_hash: DIFFERENT"
}
hc main
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 1,128,256
F=src/backend/cuda/hyper_connection_sm90.cu
apply_diff s48_hc_pre_once.diff
sed -i 's/kHcOwnSinkhornMaxRows = 64;/kHcOwnSinkhornMaxRows = 0;/' $F; gpu_build bench_hc; hc shared
sed -i 's/kHcOwnSinkhornMaxRows = 0;/kHcOwnSinkhornMaxRows = int64_t{1} << 30;/' $F; gpu_build bench_hc; hc own
sed -i 's/kHcOwnSinkhornMaxRows = int64_t{1} << 30;/kHcOwnSinkhornMaxRows = 64;/' $F
gpu_build bench_hc dsinfer gpu_ops_test
hc once
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test.log" 2>&1; echo "gpu_ops_test HcTest rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test.log" | head -12
bench_flash once_mma --batches 1 --fp8-mma
bench_flash once_default --batches 1,128,256
git apply -R gpu_run/s48_hc_pre_once.diff
echo "total $(( $(date +%s) - t0 )) s"
