#!/usr/bin/env bash
# Per-kernel device times of one flash-l8 decode step (graph replay, batch B) under Nsight Compute:
#   scripts/profile_decode_step.sh OUT_DIR [BATCH]
# Needs a built cuda-release tree and ncu (Nsight Compute). ncu runs kernels one at a time, so
# the times are each kernel alone (no overlap between kernels, branches or PDL).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?OUT_DIR}"
batch="${2:-1}"
mkdir -p "$out"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
"$ncu_bin" --clock-control none --profile-from-start off \
  --metrics gpu__time_duration.sum --csv \
  build-cuda/bin/dsinfer bench --preset flash-l8 --batches "$batch" --prefill 0 --steps 1 --profile-step \
  > "$out/ncu_step_b$batch.csv" 2> "$out/ncu_step_b$batch.err" || { tail -5 "$out/ncu_step_b$batch.err"; exit 1; }
python3 tools/ncu_summary.py "$out/ncu_step_b$batch.csv"
