#!/usr/bin/env bash
# A record: session 54 measured the two-row-tile form on an H100 (no gain: docs/perf.md "Session 54")
# and deleted both s52_bf16_few diffs, so this script no longer runs as is.
# Session 53, for the few device seconds left after the failed starts (carry [".devcarry"]): the
# bf16 few-row tile's two- and four-row-tile forms (s52_bf16_few_two_row_tiles.diff,
# s52_bf16_few_four_on_two.diff) on the head only: bench_qgemm --tokens 1 --only head (bf16q) for
# main and each form in one call, and the Bf16Tc op tests (every tile bit for bit) on the two-row
# form.
# c53a.sh is the full measurement (decode, the suite, ncu) for a session with device time.
source "$(dirname "$0")/common.sh"
gpu_build bench_qgemm gpu_ops_test
bf16q main 1 head
bf16q main_again 1 head
apply_diff s52_bf16_few_two_row_tiles.diff
gpu_build bench_qgemm gpu_ops_test
timeout 100 build-cuda/bin/gpu_ops_test --gtest_filter='Bf16Tc*:SparseAttention*' > "$OUT/bf16_ops_test.log" 2>&1; echo "gpu_ops_test Bf16Tc rc=$?"
grep -E "PASSED|FAILED|Failure" -A3 "$OUT/bf16_ops_test.log" | head -12
bf16q wm2 1 head
apply_diff s52_bf16_few_four_on_two.diff
gpu_build bench_qgemm
bf16q wm4 1 head
unapply_diff s52_bf16_few_four_on_two.diff
unapply_diff s52_bf16_few_two_row_tiles.diff
echo "total $(( $(date +%s) - t0 )) s"
