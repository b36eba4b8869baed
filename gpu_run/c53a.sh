#!/usr/bin/env bash
# A record: session 54 measured the two-row-tile form on an H100 (no gain: docs/perf.md "Session 54")
# and deleted both s52_bf16_few diffs, so this script no longer runs as is.
# Prepared in session 52 (not run), carry [".devcarry"]; the tree is main. The bf16 few-row
# tile's two-row-tile form for one-slice matrices, the head (s52_bf16_few_two_row_tiles.diff):
# session 52's ncu had the head's step set by each warp's chain of 12 dependent mma (stall_wait
# mostly on the HMMAs and their NOPs, 46% of the samples; 8 warps an SM), not by its bytes
# (DRAM 72%).
# With two row tiles a warp, two independent chains interleave over a 32 KB step (5 stages of
# 36 KB, 137 registers, one block an SM); each element's chain is the same, so the same bits.
# bench_qgemm's bf16 shapes at 1 row and the model's decode, main then the form in the same call;
# the Bf16Tc op tests (every tile bit for bit; one slice at k 4,096 and 592 takes the form) and the
# sparse attention's (their fixture is new); four row tiles a warp (s52_bf16_few_four_on_two.diff);
# then the GPU suite with the faster form and ncu of its head in the time left. Trimmed in session
# 53 to the device time left (no 8-row bf16q, decode batches 1 / 32 / 128 or $BATCHES, ncu last).
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-560} - ($(date +%s) - t0) )); }
gpu_build dsinfer bench_qgemm
bf16q main 1
bench_flash main --batches ${BATCHES:-1,32,128}
apply_diff s52_bf16_few_two_row_tiles.diff
gpu_build dsinfer bench_qgemm gpu_ops_test
timeout 150 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*:SparseAttention*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
grep -E "PASSED|FAILED|Failure|bf16 tc" -A3 "$OUT/bf16_ops_test.log" | head -16
bf16q wm2 1
bench_flash wm2 --batches ${BATCHES:-1,32,128}
# Four row tiles a warp (s52_bf16_few_four_on_two.diff, on top of the two: 3 stages of 72 KB,
# 183 registers).
apply_diff s52_bf16_few_four_on_two.diff
gpu_build dsinfer bench_qgemm
bf16q wm4 1
bench_flash wm4 --batches ${BATCHES:-1,32}
# The suite with the faster form (the two-row tiles unless four were faster at one row).
h2=$(grep -o '"shape": "head".*"us": [0-9.]*' "$OUT/qgemm_wm2.jsonl" | grep -o '[0-9.]*$')
h4=$(grep -o '"shape": "head".*"us": [0-9.]*' "$OUT/qgemm_wm4.jsonl" | grep -o '[0-9.]*$')
four=0; awk "BEGIN { exit !($h4 < $h2) }" && four=1
[ $four = 1 ] || unapply_diff s52_bf16_few_four_on_two.diff
echo "suite with $([ $four = 1 ] && echo four || echo two) row tiles (head $h2 / $h4 us)"
[ "$(left)" -gt 200 ] && { gpu_build; gpu_suite $(( $(left) - 10 )); }
[ "$(left)" -gt 60 ] && ncu_kernel Bf16TcFewKernel 0 build-cuda/bin/bench_qgemm --tokens 1 --only head
[ $four = 1 ] && unapply_diff s52_bf16_few_four_on_two.diff
unapply_diff s52_bf16_few_two_row_tiles.diff
echo "total $(( $(date +%s) - t0 )) s"
