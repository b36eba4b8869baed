#!/usr/bin/env bash
# Session 51, fifth call (warm after c51d, carry [".devcarry"]), as run inline: bench_gemv's
# routed shapes at 4 / 8 / 16 / 2 warps a block (--qlinear-warps; the same bits): 27.55 / 27.43 /
# 27.51 / 33.35 us for the w1 + w3 pair, 15.98 / 15.99 / 15.92 / 15.76 for w2 (perf.md
# "Session 51").
source "$(dirname "$0")/common.sh"
gpu_build bench_gemv
for w in 4 8 16 2; do
  for s in experts_w13 experts_w2; do
    timeout 30 build-cuda/bin/bench_gemv --prequant --only $s --qlinear-warps $w |
      grep -o '"shape": "[a-z_0-9]*"\|"us": [0-9.]*' | paste -d" " - - | sed "s/^/warps $w /"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
