#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install packages, build, prepare the embedded default
# model (models/tiny), and run the main job on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j"$(nproc)"
scripts/prepare_default_model.sh
echo
echo "== dsinfer logits on the embedded default model (models/tiny) =="
printf '{"ids": [0, 100, 2000, 30000, 129000]}\n' > build/demo_ids.json
build/bin/dsinfer logits --model models/tiny --ids-file build/demo_ids.json --out build/demo_logits.npy
echo "wrote build/demo_logits.npy (logits of 5 positions x 129280)"
