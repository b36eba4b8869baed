#!/usr/bin/env bash
# Session 58, after the review's mends (about 5 minutes): the wide tile only past 128 expected
# pairs a slot, ExpertsMatchCpuBitForBit at T = 330 and 400 (the wide tile's 160- and 192-token
# tiles, two blocks a slot, 3 slices through its shared-memory totals). The GPU suite, then the
# mode's 8,192-token prefill (192 pairs a slot: the wide tile).
source "$(dirname "$0")/common.sh"
gpu_build
gpu_suite 280
grep -h "ExpertsMatchCpuBitForBit" build-cuda/Testing/Temporary/LastTest.log 2>/dev/null | grep -E "OK|FAILED" | head -5
bench_flash main_mode --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"
