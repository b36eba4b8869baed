#!/usr/bin/env bash
# Session 40, after c40b on the same machine. Carry [".devcarry"]. Everything built, then the GPU
# suite (the mode's tests among them; qgemm_ws's tile walk now from tile_order.cuh) and the V4.1
# goldens on this machine's compiler.
source "$(dirname "$0")/common.sh"
gpu_build
timeout 60 ctest --test-dir build-cuda -R "GoldenV41Test|GoldenDSpark" --output-on-failure > "$OUT/golden_v41.log" 2>&1; echo "golden v41 rc=$?"; grep -E "tests passed|actual" "$OUT/golden_v41.log" | head -6
timeout 300 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | head -16
echo "total $(( $(date +%s) - t0 )) s"
